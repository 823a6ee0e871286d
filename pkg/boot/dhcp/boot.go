package dhcp

import (
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/boot/pxe"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// ipxeNoProxyWait is option 175 (iPXE encapsulated options) holding
// sub-option 176 (no-pxedhcp) = 1: iPXE then takes the first offer instead of
// waiting 2-3 s for proxyDHCP offers (measured, see shared/LAB.md).
var ipxeNoProxyWait = []byte{0xb0, 0x01, 0x01, 0xff}

// pxeDiscoveryControl is option 43 (PXE vendor options) holding sub-option
// 6 (PXE_DISCOVERY_CONTROL) = 8: no boot server discovery, use the boot file
// in this packet (PXE 2.1 §2.4.6, as dnsmasq and tinkerbell smee send).
var pxeDiscoveryControl = []byte{0x06, 0x01, 0x08, 0xff}

// bootOptions adds what client c needs to boot: the TFTP first stage for
// firmware PXE, an HTTP URL for UEFI HTTP boot (x86-64 and arm64: the
// machine's agent UKI), the iPXE script URL for iPXE.
// Nothing for clients that are not network-booting, or unknown machines
// under the ignore policy (m is nil then).
func (h *Handler) bootOptions(r, req *dhcpv4.DHCPv4, c pxe.Client, m *machine.Machine) {
	if !c.Bootable || m == nil {
		return
	}
	mac := req.ClientHWAddr.String()
	// siaddr (next server) in every boot reply: iPXE ignores a ProxyDHCP
	// offer or ACK unless it has both siaddr and a boot file name
	// (dhcp_has_pxeopts in iPXE's dhcp.c; seen in the e2e proxy test).
	r.ServerIPAddr = h.cfg.ServerIP.AsSlice()
	switch {
	case c.IPXE && h.cfg.HTTPBase == "":
		return // no script URL to give (warned at start)
	case c.IPXE:
		// iPXE gets its script over HTTP, never the first stage again:
		// that would chainload iPXE forever (reproduced, shared/LAB.md).
		setFile(r, h.ScriptURL(mac, c.Arch))
		if h.cfg.Mode == ModeFull {
			r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionEtherboot, ipxeNoProxyWait))
		}
	case c.HTTPBoot:
		f := h.cfg.BootFiles[c.Arch]
		if f == "" {
			h.cfg.Logger.Warn("dhcp no boot file for arch", "mac", mac, "arch", c.Arch)
			return
		}
		if !strings.HasPrefix(f, "http://") && !strings.HasPrefix(f, "https://") {
			if h.cfg.HTTPBase == "" {
				return // no URL to give (warned at start)
			}
			if f == AgentUKI {
				f = h.UKIURL(mac)
			} else {
				f = h.cfg.HTTPBase + "/boot/" + f
			}
		}
		setFile(r, f)
		// UEFI HTTP boot ignores offers without "HTTPClient" (UEFI 2.x §24.7.2).
		r.UpdateOption(dhcpv4.OptClassIdentifier("HTTPClient"))
	default:
		f := h.cfg.BootFiles[c.Arch]
		if f == "" {
			h.cfg.Logger.Warn("dhcp no boot file for arch", "mac", mac, "arch", c.Arch)
			return
		}
		r.BootFileName = f
		r.UpdateOption(dhcpv4.OptTFTPServerName(h.cfg.ServerIP.String()))
		// EDK2 treats an offer as a PXE offer only with "PXEClient" in option 60.
		r.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient"))
		r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation, pxeDiscoveryControl))
	}
	// PXE 2.1: servers echo the client machine identifier.
	if v := req.Options.Get(dhcpv4.OptionClientMachineIdentifier); v != nil {
		r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionClientMachineIdentifier, v))
	}
}

// ScriptURL is the iPXE script URL a machine is sent to; the HTTP side
// renders the machine's script (or the discovery script) there.
func (h *Handler) ScriptURL(mac, arch string) string {
	// mac is normalized hex with colons and arch one of pxe.Arch*: nothing to escape.
	return h.cfg.HTTPBase + "/ipxe?mac=" + mac + "&arch=" + arch
}

// UKIURL is the URL of a machine's agent UKI, which the HTTP side
// (pkg/boot/httpboot, GET /uki/{file}) assembles for the machine's state:
// the MAC in the path, with dashes, and the name ending in .efi, so that
// firmware that tells an EFI application by its name (EDK2 does, when
// the answer has no Content-Type) and firmware that mishandles a query
// string both boot it.
func (h *Handler) UKIURL(mac string) string {
	return h.cfg.HTTPBase + "/uki/" + strings.ReplaceAll(mac, ":", "-") + ".efi"
}

// setFile puts a boot file name in the file field when it fits (128 bytes
// with its NUL) and always in option 67, which has no such limit.
func setFile(r *dhcpv4.DHCPv4, name string) {
	if len(name) < 128 {
		r.BootFileName = name
	}
	r.UpdateOption(dhcpv4.OptBootFileName(name))
}
