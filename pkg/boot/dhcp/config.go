// Package dhcp is ingot's DHCPv4 server for network boot. Handler.Handle is
// the whole decision, a function of the request, the store and the clock;
// Server is the thin socket loop around it.
//
// Two modes: "full" hands out addresses from pools and boot options,
// "proxy" (proxyDHCP, ports 67 and 4011) runs beside the site's DHCP server
// and answers only network-boot clients, with boot options and no address.
package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingot-dev/ingot/pkg/boot/pxe"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Store is the part of store.Store the DHCP server uses. Lookups that find
// nothing return an error wrapping store.ErrNotFound. The handler reads all
// leases once (ListLeases) into an index it keeps in step with its own
// commits; per request it reads only MachineByMAC. PutLease is called
// from many requests at once, so a store should share one fsync among
// concurrent calls (store.Bolt's lease log does).
type Store interface {
	LeaseByMAC(ctx context.Context, mac string) (*store.Lease, error)
	LeaseByIP(ctx context.Context, ip netip.Addr) (*store.Lease, error)
	// PutLease must return only once the lease is durable: the ACK is sent after it.
	PutLease(ctx context.Context, l store.Lease) error
	ListLeases(ctx context.Context) ([]store.Lease, error)
	DeleteLease(ctx context.Context, mac string) error
	MachineByMAC(ctx context.Context, mac string) (*machine.Machine, error)
}

// Discoverer records a network-boot client no machine has (--unknown
// discover): the fleet service (pkg/fleet) creates it in state discovered
// with an event, and returns the machine a MAC already has unchanged.
type Discoverer interface {
	Discover(ctx context.Context, mac, arch, actor string) (*machine.Machine, error)
}

// Modes.
const (
	ModeFull  = "full"
	ModeProxy = "proxy"
	ModeOff   = "off"
)

// What to do with machines the store does not know.
const (
	UnknownIgnore   = "ignore"   // full mode: an address but no boot options; proxy mode: no answer
	UnknownDiscover = "discover" // record a discovered machine and boot it into the discovery script
)

// Lease states as stored in store.Lease.State.
const (
	StateBound    = "bound"
	StateReleased = "released"
	StateDeclined = "declined"
)

// Config is everything the DHCP server needs. cmd/ingot fills it from flags.
type Config struct {
	Interface  string     // the only interface served; required by NewServer
	ServerIP   netip.Addr // our address on Interface: server identifier, siaddr, TFTP server; zero = first IPv4 of Interface
	Mode       string     // "full", "proxy" or "off"; "" = full
	Pools      []Pool     // full mode: one per subnet served (directly or through relays)
	BootFiles  BootFiles  // first-stage iPXE binaries by pxe.Arch*; nil = DefaultBootFiles
	HTTPBase   string     // e.g. http://10.77.0.1:8080 ; iPXE gets {HTTPBase}/ipxe?mac=..&arch=..
	Unknown    string     // "ignore" or "discover"; "" = discover
	LeaseTime  time.Duration
	Store      Store
	Discover   Discoverer            // required with Unknown discover
	Logger     *slog.Logger          // nil = silent
	Registerer prometheus.Registerer // nil = no metrics
	Now        func() time.Time      // nil = time.Now

	// DeclineHold is how long an address a client DECLINEd stays unused; 0 = 10 minutes.
	DeclineHold time.Duration
	// OfferHold is how long an offered address is kept for the client; 0 = 60 s.
	OfferHold time.Duration
	// Active says whether this instance answers now (active.go): several
	// instances sharing an etcd store answer a segment one at a time. nil:
	// always.
	Active func() bool
}

// BootFiles maps a client architecture (pxe.Arch* names) to the file it
// loads first. TFTP names are relative to the TFTP root; for HTTP-boot
// arches a value that is not an http(s) URL is served from
// {HTTPBase}/boot/{value}, and AgentUKI names the machine's agent UKI.
type BootFiles map[string]string

// AgentUKI, as the boot file of an HTTP-boot arch, sends the firmware to the
// machine's agent UKI (Handler.UKIURL): kernel, initrd and command line in
// one EFI application that the firmware's HTTP boot runs itself, with no
// iPXE and no TFTP. Set "ipxe.efi" instead to chainload iPXE over HTTP.
const AgentUKI = "ingot:agent-uki"

// DefaultBootFiles are the names Debian's ipxe package installs, and the
// agent UKI for x86-64 and arm64 UEFI HTTP boot: the HTTP side puts the
// machine's agent kernel on systemd's stub of the kernel's architecture
// (systemd-boot-efi, and systemd-boot-efi:arm64 beside it). Debian 12 ships
// no arm64 iPXE, so arm64 firmware PXE (arch 11) has no first stage unless
// one is put in the TFTP root; arm64 HTTP boot needs none.
func DefaultBootFiles() BootFiles {
	return BootFiles{
		pxe.ArchBIOS:          "undionly.kpxe",
		pxe.ArchUEFIX64:       "snponly.efi",
		pxe.ArchUEFIIA32:      "snponly-ia32.efi",
		pxe.ArchUEFIARM32:     "snponly-arm32.efi",
		pxe.ArchUEFIARM64:     "snponly-arm64.efi",
		pxe.ArchUEFIX64HTTP:   AgentUKI,
		pxe.ArchUEFIARM64HTTP: AgentUKI,
	}
}

// Pool is the addresses handed out on one subnet.
type Pool struct {
	Subnet    netip.Prefix // e.g. 10.77.0.0/24; relayed requests pick the pool whose subnet holds giaddr
	Start     netip.Addr   // first dynamic address
	End       netip.Addr   // last dynamic address (inclusive)
	Router    netip.Addr   // option 3; zero = none
	DNS       []netip.Addr // option 6
	Domain    string       // option 15
	LeaseTime time.Duration
}

// ParsePool reads a pool from its flag form:
//
//	SUBNET,START-END[,router=IP][,dns=IP+IP][,domain=NAME][,lease=DURATION]
//	10.77.0.0/24,10.77.0.100-10.77.0.200,router=10.77.0.1,dns=10.77.0.1,lease=1h
func ParsePool(s string) (Pool, error) {
	parts := strings.Split(s, ",")
	if len(parts) < 2 {
		return Pool{}, fmt.Errorf("pool %q: expected SUBNET,START-END[,router=IP][,dns=IP+IP][,domain=NAME][,lease=1h]", s)
	}
	var p Pool
	var err error
	if p.Subnet, err = netip.ParsePrefix(parts[0]); err != nil {
		return Pool{}, fmt.Errorf("pool %q: subnet: %w", s, err)
	}
	p.Subnet = p.Subnet.Masked()
	lo, hi, ok := strings.Cut(parts[1], "-")
	if !ok {
		return Pool{}, fmt.Errorf("pool %q: range %q: expected START-END", s, parts[1])
	}
	if p.Start, err = netip.ParseAddr(lo); err != nil {
		return Pool{}, fmt.Errorf("pool %q: range start: %w", s, err)
	}
	if p.End, err = netip.ParseAddr(hi); err != nil {
		return Pool{}, fmt.Errorf("pool %q: range end: %w", s, err)
	}
	for _, kv := range parts[2:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "router":
			p.Router, err = netip.ParseAddr(v)
		case "dns":
			for _, a := range strings.Split(v, "+") {
				var ip netip.Addr
				if ip, err = netip.ParseAddr(a); err != nil {
					break
				}
				p.DNS = append(p.DNS, ip)
			}
		case "domain":
			p.Domain = v
		case "lease":
			p.LeaseTime, err = time.ParseDuration(v)
		default:
			err = fmt.Errorf("unknown key %q (want router, dns, domain or lease)", k)
		}
		if err != nil {
			return Pool{}, fmt.Errorf("pool %q: %s: %w", s, kv, err)
		}
	}
	return p, p.validate()
}

func (p Pool) validate() error {
	switch {
	case !p.Subnet.IsValid() || !p.Subnet.Addr().Is4():
		return fmt.Errorf("pool %s: subnet must be an IPv4 CIDR", p.Subnet)
	case !p.Subnet.Contains(p.Start) || !p.Subnet.Contains(p.End):
		return fmt.Errorf("pool %s: range %s-%s is not inside the subnet", p.Subnet, p.Start, p.End)
	case p.End.Less(p.Start):
		return fmt.Errorf("pool %s: range end %s is before start %s", p.Subnet, p.End, p.Start)
	case p.Router.IsValid() && !p.Router.Is4():
		return fmt.Errorf("pool %s: router %s is not IPv4", p.Subnet, p.Router)
	}
	for _, d := range p.DNS {
		if !d.Is4() {
			return fmt.Errorf("pool %s: dns %s is not IPv4", p.Subnet, d)
		}
	}
	return nil
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Mode == "" {
		c.Mode = ModeFull
	}
	if c.Unknown == "" {
		c.Unknown = UnknownDiscover
	}
	if c.BootFiles == nil {
		c.BootFiles = DefaultBootFiles()
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = time.Hour
	}
	if c.DeclineHold == 0 {
		c.DeclineHold = 10 * time.Minute
	}
	if c.OfferHold == 0 {
		c.OfferHold = time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.HTTPBase = strings.TrimRight(c.HTTPBase, "/")
	switch {
	case c.Mode != ModeFull && c.Mode != ModeProxy && c.Mode != ModeOff:
		return c, fmt.Errorf("dhcp mode %q: expected full, proxy or off", c.Mode)
	case c.Unknown != UnknownIgnore && c.Unknown != UnknownDiscover:
		return c, fmt.Errorf("dhcp unknown-machine policy %q: expected ignore or discover", c.Unknown)
	case c.Store == nil && c.Mode != ModeOff:
		return c, errors.New("dhcp: no store configured")
	case c.Unknown == UnknownDiscover && c.Discover == nil && c.Mode != ModeOff:
		return c, errors.New("dhcp: --unknown discover needs a discoverer (the fleet service) to record unknown machines")
	case c.Mode == ModeFull && len(c.Pools) == 0:
		return c, errors.New("dhcp full mode needs at least one pool (--dhcp-pool SUBNET,START-END)")
	case c.ServerIP.IsValid() && !c.ServerIP.Is4():
		return c, fmt.Errorf("dhcp server IP %s is not IPv4", c.ServerIP)
	}
	for _, p := range c.Pools {
		if err := p.validate(); err != nil {
			return c, err
		}
	}
	return c, nil
}
