package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/ingot-dev/ingot/pkg/boot/pxe"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// PXEPort is the PXE boot server port proxyDHCP also listens on.
const PXEPort = 4011

// Meta is what the socket layer knows about a request besides its bytes.
type Meta struct {
	Port int            // local port it arrived on: 67, or 4011 in proxy mode
	Peer netip.AddrPort // its source address
}

// Handler decides the reply to each request. It is safe for concurrent use,
// and decides one request of a client at a time (turn.go); its only state
// besides the store and its index of the store's leases is short-lived:
// addresses held for outstanding offers, addresses recently declined and
// the requests being decided.
type Handler struct {
	cfg     Config
	metrics *metrics

	mu       sync.Mutex
	loaded   bool                     // leases and owner hold the store's leases
	leases   map[string]store.Lease   // by MAC: the store's leases, as committed by this handler
	owner    map[netip.Addr]string    // address -> MAC whose lease names it
	holds    map[netip.Addr]hold      // offered or being committed, by address
	heldIP   map[string]netip.Addr    // the address each MAC holds
	declined map[netip.Addr]time.Time // address -> unusable until
	cursor   []uint32                 // per pool: next address to try
	turns    map[string]*turn         // by MAC: the request being decided (turn.go)
	// answering: Config.Active said yes last time (active.go).
	answering atomic.Bool
}

type hold struct {
	mac   string
	until time.Time
	m     *machine.Machine // the machine record (nil: none) read when the hold began (until - OfferHold)
}

// NewHandler checks cfg and builds a Handler.
func NewHandler(cfg Config) (*Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Mode != ModeOff && !cfg.ServerIP.Is4() {
		return nil, errors.New("dhcp: server IP must be set to an IPv4 address of the served interface")
	}
	if cfg.Mode != ModeOff && cfg.HTTPBase == "" {
		cfg.Logger.Warn("dhcp has no HTTP base URL: iPXE and UEFI HTTP boot clients get no boot file")
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, metrics: m, holds: map[netip.Addr]hold{}, heldIP: map[string]netip.Addr{},
		leases: map[string]store.Lease{}, owner: map[netip.Addr]string{}, declined: map[netip.Addr]time.Time{},
		cursor: make([]uint32, len(cfg.Pools)), turns: map[string]*turn{}}
	for i, p := range cfg.Pools {
		h.cursor[i] = ip4u(p.Start)
	}
	return h, nil
}

// Handle returns the reply to req, or nil to stay silent. An error means the
// request could not be decided (the store failed); nothing should be sent.
func (h *Handler) Handle(ctx context.Context, req *dhcpv4.DHCPv4, in Meta) (*dhcpv4.DHCPv4, error) {
	start := time.Now()
	reply, err := h.handle(ctx, req, in)
	h.metrics.observe(req, reply, err, time.Since(start))
	if err != nil {
		h.cfg.Logger.Warn("dhcp request failed", "mac", req.ClientHWAddr.String(), "xid", req.TransactionID.String(),
			"type", req.MessageType().String(), "err", err)
	}
	return reply, err
}

func (h *Handler) handle(ctx context.Context, req *dhcpv4.DHCPv4, in Meta) (*dhcpv4.DHCPv4, error) {
	if req.OpCode != dhcpv4.OpcodeBootRequest || req.HWType != iana.HWTypeEthernet || len(req.ClientHWAddr) != 6 {
		// Not an Ethernet client request (an hlen of 8 or 20 is no boot
		// NIC's): leases are keyed by 6-byte MACs. Dropped in silence.
		h.cfg.Logger.Debug("dhcp request ignored: expected a BOOTREQUEST from a 6-byte Ethernet chaddr",
			"op", req.OpCode.String(), "htype", req.HWType.String(), "hlen", len(req.ClientHWAddr))
		return nil, nil
	}
	if !h.active() {
		return nil, nil // another instance answers this segment (active.go)
	}
	switch h.cfg.Mode {
	case ModeProxy:
		return h.proxy(ctx, req, in)
	case ModeFull:
		if in.Port == PXEPort {
			return nil, nil
		}
	default:
		return nil, nil
	}
	release, ok := h.take(ctx, req.ClientHWAddr.String())
	if !ok {
		return nil, nil // another request of this client is being decided, and one waits for it
	}
	defer release()
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		return h.discover(ctx, req)
	case dhcpv4.MessageTypeRequest:
		return h.request(ctx, req)
	case dhcpv4.MessageTypeRelease:
		return nil, h.release(ctx, req)
	case dhcpv4.MessageTypeDecline:
		return nil, h.decline(ctx, req)
	case dhcpv4.MessageTypeInform:
		return h.inform(ctx, req)
	}
	return nil, nil
}

// discover answers DHCPDISCOVER with an OFFER (RFC 2131 §4.3.1).
func (h *Handler) discover(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	pi, ok := h.poolFor(req, netip.Addr{})
	if !ok {
		return nil, nil // relayed from a subnet we do not serve
	}
	mac := req.ClientHWAddr.String()
	c := pxe.Classify(req)
	m, err := h.machine(ctx, mac, c)
	if err != nil {
		return nil, err
	}
	ip, err := h.choose(ctx, pi, mac, m, addr(req.RequestedIPAddress()))
	if err != nil || !ip.IsValid() {
		return nil, err
	}
	reply := h.newReply(req, dhcpv4.MessageTypeOffer)
	reply.YourIPAddr = ip.AsSlice()
	h.leaseOptions(reply, h.cfg.Pools[pi], true)
	h.bootOptions(reply, req, c, m)
	return reply, nil
}

// request answers DHCPREQUEST with ACK or NAK (RFC 2131 §4.3.2). The lease
// is committed to the store before the ACK is returned.
func (h *Handler) request(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	mac := req.ClientHWAddr.String()
	sid, reqIP, ciaddr := addr(req.ServerIdentifier()), addr(req.RequestedIPAddress()), addr(req.ClientIPAddr)
	var ip netip.Addr
	switch {
	case sid.IsValid() && !sid.IsUnspecified(): // SELECTING
		if sid != h.cfg.ServerIP {
			h.unhold(mac) // the client chose another server's offer
			return nil, nil
		}
		ip = reqIP
		if !ip.IsValid() {
			ip = ciaddr
		}
	case reqIP.IsValid() && !reqIP.IsUnspecified(): // INIT-REBOOT
		ip = reqIP
	case ciaddr.IsValid() && !ciaddr.IsUnspecified(): // RENEWING (unicast) or REBINDING (broadcast)
		ip = ciaddr
	default:
		return nil, nil // no address named at all: malformed
	}
	pi, ok := h.poolFor(req, ciaddr)
	if !ok {
		return nil, nil
	}
	pool := h.cfg.Pools[pi]
	if !pool.Subnet.Contains(ip) {
		return h.nak(req, fmt.Sprintf("%s is not on subnet %s", ip, pool.Subnet)), nil
	}
	c := pxe.Classify(req)
	m, ok := h.heldMachine(ip, mac, h.cfg.Now())
	if !ok {
		var err error
		if m, err = h.machine(ctx, mac, c); err != nil {
			return nil, err
		}
	}
	if r := reserved(m); r.IsValid() && r != ip {
		return h.nak(req, fmt.Sprintf("%s has the reserved address %s", mac, r)), nil
	}
	if why, err := h.claim(ctx, pi, mac, ip, m); err != nil || why != "" {
		if err != nil {
			return nil, err
		}
		return h.nak(req, why), nil
	}
	now := h.cfg.Now()
	l := store.Lease{MAC: mac, IP: ip, Hostname: req.HostName(), Subnet: pool.Subnet.String(),
		Expires: now.Add(h.leaseTime(pool)), State: StateBound, Updated: now}
	if m != nil {
		l.MachineID = m.ID
	}
	err := h.cfg.Store.PutLease(ctx, l)
	h.mu.Lock()
	if err == nil {
		h.indexLocked(l)
	}
	h.dropLocked(ip, mac)
	h.mu.Unlock()
	if errors.Is(err, store.ErrConflict) { // the store knows a live lease of another client on ip
		h.learnConflict(ctx, ip)
		return h.nak(req, fmt.Sprintf("%s is in use", ip)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("committing lease %s for %s: %w", ip, mac, err)
	}
	reply := h.newReply(req, dhcpv4.MessageTypeAck)
	reply.YourIPAddr = ip.AsSlice()
	reply.ClientIPAddr = req.ClientIPAddr
	h.leaseOptions(reply, pool, true)
	h.bootOptions(reply, req, c, m)
	return reply, nil
}

// release ends the client's lease (RFC 2131 §4.3.4). No reply.
func (h *Handler) release(ctx context.Context, req *dhcpv4.DHCPv4) error {
	if sid := addr(req.ServerIdentifier()); sid.IsValid() && sid != h.cfg.ServerIP {
		return nil // released at another server
	}
	l, err := h.leaseOn(ctx, req.ClientHWAddr.String(), addr(req.ClientIPAddr))
	if err != nil || l == nil || l.State != StateBound {
		return err
	}
	now := h.cfg.Now()
	l.State, l.Expires, l.Updated = StateReleased, now, now
	return h.store(ctx, *l, "releasing")
}

// decline marks an address the client found in use (RFC 2131 §4.3.3): it
// is not handed out again for DeclineHold. No reply. Only the client the
// address was offered or leased to may decline it.
func (h *Handler) decline(ctx context.Context, req *dhcpv4.DHCPv4) error {
	mac := req.ClientHWAddr.String()
	ip := addr(req.RequestedIPAddress())
	if !ip.IsValid() || h.poolContaining(ip) < 0 {
		return nil
	}
	now := h.cfg.Now()
	until := now.Add(h.cfg.DeclineHold)
	h.mu.Lock()
	// Only the client the address was offered or leased to may decline
	// it (as Kea): else any host could keep any address out of use.
	if err := h.loadLocked(ctx); err != nil {
		h.mu.Unlock()
		return err
	}
	hd, held := h.holds[ip]
	if !(held && hd.mac == mac && now.Before(hd.until)) && h.owner[ip] != mac {
		h.mu.Unlock()
		h.cfg.Logger.Info("dhcp decline ignored: the address was neither offered nor leased to this client", "mac", mac, "ip", ip)
		return nil
	}
	h.declined[ip] = until
	h.mu.Unlock()
	h.unholdIP(ip, mac)
	l, err := h.leaseOn(ctx, mac, ip)
	if err != nil || l == nil {
		return err
	}
	l.State, l.Expires, l.Updated = StateDeclined, until, now
	return h.store(ctx, *l, "recording declined")
}

// inform answers DHCPINFORM with configuration only (RFC 2131 §3.4): no
// yiaddr, no lease time.
func (h *Handler) inform(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	ciaddr := addr(req.ClientIPAddr)
	pi := h.poolContaining(ciaddr)
	if pi < 0 {
		return nil, nil
	}
	c := pxe.Classify(req)
	m, err := h.machine(ctx, req.ClientHWAddr.String(), c)
	if err != nil {
		return nil, err
	}
	reply := h.newReply(req, dhcpv4.MessageTypeAck)
	reply.ClientIPAddr = req.ClientIPAddr
	h.leaseOptions(reply, h.cfg.Pools[pi], false)
	h.bootOptions(reply, req, c, m)
	return reply, nil
}

func (h *Handler) nak(req *dhcpv4.DHCPv4, why string) *dhcpv4.DHCPv4 {
	h.cfg.Logger.Debug("dhcp nak", "mac", req.ClientHWAddr.String(), "xid", req.TransactionID.String(), "reason", why)
	reply := h.newReply(req, dhcpv4.MessageTypeNak)
	reply.UpdateOption(dhcpv4.OptMessage(why))
	// RFC 2131 §4.3.2: a NAK to a relayed request sets the broadcast bit
	// so the relay broadcasts it to the client.
	if !isZero(req.GatewayIPAddr) {
		reply.SetBroadcast()
	}
	return reply
}

// newReply builds a reply of type t to req: xid, flags, chaddr and giaddr
// copied, relay agent information (82) echoed (RFC 3046 §2.2) and the client
// identifier (61) echoed (RFC 6842).
func (h *Handler) newReply(req *dhcpv4.DHCPv4, t dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	r := &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootReply, HWType: req.HWType, TransactionID: req.TransactionID,
		Flags: req.Flags, ClientHWAddr: req.ClientHWAddr, GatewayIPAddr: ip4(req.GatewayIPAddr),
		ClientIPAddr: net.IPv4zero, YourIPAddr: net.IPv4zero, ServerIPAddr: net.IPv4zero,
		Options: dhcpv4.Options{},
	}
	for _, code := range []dhcpv4.OptionCode{dhcpv4.OptionRelayAgentInformation, dhcpv4.OptionClientIdentifier} {
		if v := req.Options.Get(code); v != nil {
			r.UpdateOption(dhcpv4.OptGeneric(code, v))
		}
	}
	r.UpdateOption(dhcpv4.OptMessageType(t))
	r.UpdateOption(dhcpv4.OptServerIdentifier(h.cfg.ServerIP.AsSlice()))
	return r
}

// leaseOptions adds the subnet's parameters and, with times, the lease time
// and its T1/T2 (RFC 2131 §4.4.5: 0.5 and 0.875 of the lease).
func (h *Handler) leaseOptions(r *dhcpv4.DHCPv4, p Pool, times bool) {
	r.UpdateOption(dhcpv4.OptSubnetMask(net.CIDRMask(p.Subnet.Bits(), 32)))
	if p.Router.IsValid() {
		r.UpdateOption(dhcpv4.OptRouter(p.Router.AsSlice()))
	}
	if len(p.DNS) > 0 {
		ips := make([]net.IP, len(p.DNS))
		for i, d := range p.DNS {
			ips[i] = d.AsSlice()
		}
		r.UpdateOption(dhcpv4.OptDNS(ips...))
	}
	if p.Domain != "" {
		r.UpdateOption(dhcpv4.OptDomainName(p.Domain))
	}
	if times {
		lt := h.leaseTime(p)
		r.UpdateOption(dhcpv4.OptIPAddressLeaseTime(lt))
		r.UpdateOption(dhcpv4.OptRenewTimeValue(lt / 2))
		r.UpdateOption(dhcpv4.OptRebindingTimeValue(lt * 7 / 8))
	}
}

func (h *Handler) leaseTime(p Pool) time.Duration {
	if p.LeaseTime > 0 {
		return p.LeaseTime
	}
	return h.cfg.LeaseTime
}

// machine returns the enrolled machine with this MAC, nil if none. A
// network-boot client the store does not know is recorded as discovered
// when the policy says so.
func (h *Handler) machine(ctx context.Context, mac string, c pxe.Client) (*machine.Machine, error) {
	m, err := h.cfg.Store.MachineByMAC(ctx, mac)
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("looking up machine %s: %w", mac, err)
	}
	if h.cfg.Unknown != UnknownDiscover || !c.Bootable {
		return nil, nil
	}
	m, err = h.cfg.Discover.Discover(ctx, mac, c.Arch, "dhcp")
	if err != nil {
		return nil, fmt.Errorf("recording discovered machine %s: %w", mac, err)
	}
	h.cfg.Logger.Info("dhcp discovered machine", "mac", mac, "machine", m.ID, "arch", c.Arch)
	return m, nil
}

// leaseOn returns mac's lease if it names ip and no other client's lease
// has taken ip since, else nil. Only such a lease may be released or
// declined: rewriting a lease that another client's lease replaced on ip
// would take ip back from that client in the index (and the store refuses
// it: LeaseConflict).
func (h *Handler) leaseOn(ctx context.Context, mac string, ip netip.Addr) (*store.Lease, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, err := h.leaseLocked(ctx, mac)
	if err != nil || l == nil || l.IP != ip || h.owner[ip] != mac {
		return nil, err
	}
	return l, nil
}

// store commits l and indexes it.
func (h *Handler) store(ctx context.Context, l store.Lease, doing string) error {
	if err := h.cfg.Store.PutLease(ctx, l); err != nil {
		return fmt.Errorf("%s lease %s for %s: %w", doing, l.IP, l.MAC, err)
	}
	h.mu.Lock()
	h.indexLocked(l)
	h.mu.Unlock()
	return nil
}

func reserved(m *machine.Machine) netip.Addr {
	if m == nil || m.IPv4 == "" {
		return netip.Addr{}
	}
	ip, err := netip.ParseAddr(m.IPv4)
	if err != nil || !ip.Is4() {
		return netip.Addr{}
	}
	return ip
}

// addr converts a 4- or 16-byte net.IP to an IPv4 netip.Addr (invalid if nil).
func addr(ip net.IP) netip.Addr {
	v4 := ip.To4()
	if v4 == nil {
		return netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(v4)
	return a
}

func isZero(ip net.IP) bool { return ip == nil || ip.IsUnspecified() }

func ip4(ip net.IP) net.IP {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return net.IPv4zero
}
