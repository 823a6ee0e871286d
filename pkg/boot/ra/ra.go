// Package ra answers IPv6 Router Solicitations on the boot interface with a
// Router Advertisement carrying a ULA prefix. iPXE waits about 14 s for an
// RA after DHCPv4 unless one arrives (measured, shared/LAB.md); this makes it
// arrive at once. The advertisement names no default router (lifetime 0)
// unless configured, so clients learn a prefix and nothing else.
package ra

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// ICMPv6 message types (RFC 4861 §4).
const (
	typeRouterSolicitation  = 133
	typeRouterAdvertisement = 134
)

// Config says where to answer and what to advertise.
type Config struct {
	Interface      string
	Prefix         netip.Prefix  // a /64; zero = fd00:696e:676f:7400::/64 ("ingot" in ULA space)
	RouterLifetime time.Duration // 0: not a default router
	Logger         *slog.Logger
}

// DefaultPrefix is advertised when Config.Prefix is zero.
var DefaultPrefix = netip.MustParsePrefix("fd00:696e:676f:7400::/64")

// Responder answers Router Solicitations on one interface.
type Responder struct {
	cfg  Config
	ifc  *net.Interface
	conn *net.IPConn
	ra   []byte
}

// New checks cfg and looks the interface up; call it, and Listen, inside
// the network namespace that holds the interface.
func New(cfg Config) (*Responder, error) {
	if cfg.Interface == "" {
		return nil, errors.New("router advertisements need an explicit --interface")
	}
	if !cfg.Prefix.IsValid() {
		cfg.Prefix = DefaultPrefix
	}
	if !cfg.Prefix.Addr().Is6() || cfg.Prefix.Addr().Is4In6() || cfg.Prefix.Bits() != 64 {
		return nil, fmt.Errorf("router advertisement prefix %s: expected an IPv6 /64 (SLAAC needs 64 bits)", cfg.Prefix)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("router advertisement interface %s: %w", cfg.Interface, err)
	}
	return &Responder{cfg: cfg, ifc: ifc, ra: Advertisement(cfg.Prefix.Masked(), cfg.RouterLifetime, ifc.HardwareAddr)}, nil
}

// Listen opens a raw ICMPv6 socket bound to the interface, joined to the
// all-routers group, receiving only Router Solicitations.
func (r *Responder) Listen() error {
	if r.conn != nil {
		return nil
	}
	c, err := net.ListenIP("ip6:ipv6-icmp", &net.IPAddr{IP: net.IPv6unspecified})
	if err != nil {
		return fmt.Errorf("router advertisements on %s: opening raw ICMPv6 socket: %w", r.cfg.Interface, err)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		s := int(fd)
		var filter unix.ICMPv6Filter // a set bit blocks that type
		for i := range filter.Data {
			filter.Data[i] = 0xffffffff
		}
		filter.Data[typeRouterSolicitation>>5] &^= 1 << (typeRouterSolicitation & 31)
		mreq := &unix.IPv6Mreq{Interface: uint32(r.ifc.Index)}
		copy(mreq.Multiaddr[:], net.ParseIP("ff02::2"))
		steps := []struct {
			what string
			err  error
		}{
			{"binding to the interface", unix.BindToDevice(s, r.cfg.Interface)},
			{"filtering ICMPv6 types", unix.SetsockoptICMPv6Filter(s, unix.SOL_ICMPV6, unix.ICMPV6_FILTER, &filter)},
			// RFC 4861 §4.2: RAs are sent with hop limit 255.
			{"setting the multicast hop limit", unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, 255)},
			{"setting the unicast hop limit", unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, 255)},
			{"joining ff02::2", unix.SetsockoptIPv6Mreq(s, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq)},
		}
		for _, st := range steps {
			if st.err != nil {
				serr = fmt.Errorf("router advertisements on %s: %s: %w", r.cfg.Interface, st.what, st.err)
				return
			}
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		c.Close()
		return err
	}
	r.conn = c
	return nil
}

// Serve answers solicitations until ctx ends. It advertises once at start
// so clients already waiting hear it.
func (r *Responder) Serve(ctx context.Context) error {
	if err := r.Listen(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { r.conn.Close() })
	defer stop()
	defer r.conn.Close()
	r.cfg.Logger.Info("router advertisements", "interface", r.cfg.Interface, "prefix", r.cfg.Prefix)
	r.advertise()
	buf := make([]byte, 1500)
	for {
		n, from, err := r.conn.ReadFromIP(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("router advertisements on %s: reading: %w", r.cfg.Interface, err)
		}
		if n < 8 || buf[0] != typeRouterSolicitation || buf[1] != 0 {
			continue // RFC 4861 §6.1.1: code must be 0
		}
		r.cfg.Logger.Debug("router solicitation", "from", from)
		r.advertise()
	}
}

// advertise multicasts the RA to all nodes (RFC 4861 §6.2.6 allows a
// solicited RA to go to all-nodes).
func (r *Responder) advertise() {
	to := &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: r.cfg.Interface}
	if _, err := r.conn.WriteToIP(r.ra, to); err != nil {
		// Typically: the interface's link-local address is still tentative.
		r.cfg.Logger.Debug("sending router advertisement", "interface", r.cfg.Interface, "err", err)
	}
}

// Advertisement builds the ICMPv6 Router Advertisement (RFC 4861 §4.2) for
// prefix, with the source link-layer address option when mac is known. The
// checksum is left 0: the kernel fills it for ICMPv6 raw sockets.
func Advertisement(prefix netip.Prefix, routerLifetime time.Duration, mac net.HardwareAddr) []byte {
	b := make([]byte, 16, 16+8+32)
	b[0] = typeRouterAdvertisement
	b[4] = 64 // cur hop limit advertised to hosts
	// b[5]: M and O flags 0: no DHCPv6, addresses by SLAAC from the prefix.
	binary.BigEndian.PutUint16(b[6:], uint16(min(routerLifetime/time.Second, 9000)))
	// reachable time and retrans timer: 0 = unspecified.
	if len(mac) == 6 {
		b = append(b, 1, 1) // source link-layer address, 8 bytes
		b = append(b, mac...)
	}
	// Prefix information (RFC 4861 §4.6.2): 32 bytes.
	pi := make([]byte, 32)
	pi[0], pi[1], pi[2] = 3, 4, byte(prefix.Bits())
	pi[3] = 0xc0                              // on-link (L) and autonomous (A)
	binary.BigEndian.PutUint32(pi[4:], 86400) // valid lifetime, s
	binary.BigEndian.PutUint32(pi[8:], 14400) // preferred lifetime, s
	a := prefix.Masked().Addr().As16()
	copy(pi[16:], a[:])
	return append(b, pi...)
}
