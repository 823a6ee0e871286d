package dhcp

import (
	"context"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/boot/pxe"
)

// proxy answers as a proxyDHCP server (PXE 2.1 §2.2.2): network-boot clients
// only, boot options only, never an address. DISCOVERs on port 67 get an
// OFFER; REQUESTs to port 4011 (the PXE boot server request EDK2 and iPXE
// send after the site's server gave them an address), or on 67 naming us as
// server, get an ACK.
func (h *Handler) proxy(ctx context.Context, req *dhcpv4.DHCPv4, in Meta) (*dhcpv4.DHCPv4, error) {
	c := pxe.Classify(req)
	if !c.Bootable {
		return nil, nil
	}
	var t dhcpv4.MessageType
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		if in.Port == PXEPort {
			return nil, nil
		}
		t = dhcpv4.MessageTypeOffer
	case dhcpv4.MessageTypeRequest:
		if in.Port != PXEPort && addr(req.ServerIdentifier()) != h.cfg.ServerIP {
			return nil, nil // the client is taking the site's offer
		}
		t = dhcpv4.MessageTypeAck
	default:
		return nil, nil
	}
	m, err := h.machine(ctx, req.ClientHWAddr.String(), c)
	if err != nil || m == nil {
		return nil, err
	}
	r := h.newReply(req, t)
	if ci := addr(req.ClientIPAddr); ci.IsValid() && ci != netip.IPv4Unspecified() {
		r.ClientIPAddr = ci.AsSlice()
	}
	h.bootOptions(r, req, c, m)
	if r.Options.Get(dhcpv4.OptionBootfileName) == nil && r.BootFileName == "" {
		return nil, nil // nothing to offer (no boot file for this arch)
	}
	if r.Options.Get(dhcpv4.OptionClassIdentifier) == nil {
		// iPXE recognises a proxyDHCP offer by option 60 "PXEClient".
		r.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient"))
	}
	return r, nil
}
