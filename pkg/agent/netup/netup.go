// Package netup brings up the agent's network without any helper program:
// set the links up, pick the first interface with carrier, DHCP on it
// (insomniacslk/dhcp nclient4, raw sockets), then configure the address and
// the default route with rtnetlink messages (no `ip`, no kernel ip=).
//
// Everything uses the calling thread's network namespace (netlink and
// net.Interfaces, never /sys/class/net), so tests can run Up inside a
// namespace with netns.Do.
package netup

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"golang.org/x/sys/unix"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// Config says how to bring the network up.
type Config struct {
	Iface       string        // use this interface; "" = the first with carrier
	CarrierWait time.Duration // how long to wait for carrier; default 30 s
	DHCPTimeout time.Duration // the whole DHCP exchange; default 60 s
	ResolvConf  string        // write name servers here ("/etc/resolv.conf" as PID 1); "" = don't
	VendorClass string        // DHCP option 60; default "ingot-agent"
	// KeepLease renews the lease in the background (at half its time, as
	// RFC 2131's T1) until ctx ends, so a long image write keeps its address.
	KeepLease bool
	// RenewEvery, if shorter than half the lease, renews this often (tests).
	RenewEvery time.Duration
	Logger     *slog.Logger
}

// Lease is the configured address.
type Lease struct {
	Iface    string
	MAC      net.HardwareAddr
	Addr     net.IPNet
	Router   net.IP // nil without option 3
	DNS      []net.IP
	ServerID net.IP
	Duration time.Duration
	raw      *nclient4.Lease
}

// Up brings the network up and returns the lease it configured.
func Up(ctx context.Context, cfg Config) (Lease, error) {
	if cfg.CarrierWait <= 0 {
		cfg.CarrierWait = 30 * time.Second
	}
	if cfg.DHCPTimeout <= 0 {
		cfg.DHCPTimeout = 60 * time.Second
	}
	if cfg.VendorClass == "" {
		cfg.VendorClass = "ingot-agent"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ifc, err := waitCarrier(ctx, cfg)
	if err != nil {
		return Lease{}, err
	}
	cfg.Logger.Info("link up", "iface", ifc.Name, "mac", ifc.HardwareAddr.String())
	l, c, err := dhcp(ctx, cfg, ifc)
	if err != nil {
		return Lease{}, err
	}
	if cfg.KeepLease {
		go keep(ctx, cfg, c, l)
	} else {
		c.Close()
	}
	if err := Configure(ifc.Index, l); err != nil {
		return l, err
	}
	if cfg.ResolvConf != "" && len(l.DNS) > 0 {
		if err := durable.WriteFile(cfg.ResolvConf, []byte(ResolvConf(l.DNS)), 0o644); err != nil {
			return l, fmt.Errorf("writing %s: %w", cfg.ResolvConf, err)
		}
	}
	return l, nil
}

// ResolvConf renders name servers as resolv.conf.
func ResolvConf(dns []net.IP) string {
	var b strings.Builder
	for _, ip := range dns {
		fmt.Fprintf(&b, "nameserver %s\n", ip)
	}
	return b.String()
}

// waitCarrier sets every candidate link up and returns the first (by name)
// that reports carrier (IFF_RUNNING), polling until CarrierWait.
func waitCarrier(ctx context.Context, cfg Config) (net.Interface, error) {
	deadline := time.Now().Add(cfg.CarrierWait)
	var seen []string
	for {
		ifs, err := net.Interfaces()
		if err != nil {
			return net.Interface{}, fmt.Errorf("listing interfaces: %w", err)
		}
		cands := Candidates(ifs, cfg.Iface)
		seen = seen[:0]
		for _, ifc := range cands {
			seen = append(seen, ifc.Name)
			if ifc.Flags&net.FlagUp == 0 {
				if err := setUp(ifc.Name); err != nil {
					cfg.Logger.Warn("could not set link up", "iface", ifc.Name, "err", err)
				}
				continue
			}
			if ifc.Flags&net.FlagRunning != 0 {
				return ifc, nil
			}
		}
		if time.Now().After(deadline) {
			if cfg.Iface != "" && len(seen) == 0 {
				return net.Interface{}, fmt.Errorf("interface %s not found (is its driver loaded?)", cfg.Iface)
			}
			return net.Interface{}, fmt.Errorf("no interface with carrier after %s (tried %v; is the cable in and the driver loaded?)", cfg.CarrierWait, seen)
		}
		select {
		case <-ctx.Done():
			return net.Interface{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Candidates are the interfaces the agent may DHCP on: the one named, or
// every Ethernet-like interface except loopback, sorted by name.
func Candidates(ifs []net.Interface, name string) []net.Interface {
	var out []net.Interface
	for _, ifc := range ifs {
		switch {
		case name != "" && ifc.Name != name:
		case ifc.Flags&net.FlagLoopback != 0, len(ifc.HardwareAddr) != 6:
		default:
			out = append(out, ifc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func setUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS %s: %w", name, err)
	}
	return nil
}

// dhcp gets a lease; the caller owns (and closes) the returned client.
func dhcp(ctx context.Context, cfg Config, ifc net.Interface) (Lease, *nclient4.Client, error) {
	c, err := nclient4.New(ifc.Name, nclient4.WithTimeout(4*time.Second), nclient4.WithRetry(3))
	if err != nil {
		return Lease{}, nil, fmt.Errorf("DHCP on %s: %w", ifc.Name, err)
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DHCPTimeout)
	defer cancel()
	var last error
	for dctx.Err() == nil {
		lease, err := c.Request(dctx, dhcpv4.WithOption(dhcpv4.OptClassIdentifier(cfg.VendorClass)),
			dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionDomainNameServer))
		if err == nil {
			l, err := leaseOf(ifc, lease)
			if err != nil {
				c.Close()
			}
			return l, c, err
		}
		last = err
		cfg.Logger.Warn("DHCP attempt failed", "iface", ifc.Name, "err", err)
	}
	c.Close()
	return Lease{}, nil, fmt.Errorf("DHCP on %s (%s): no lease within %s: %v", ifc.Name, ifc.HardwareAddr, cfg.DHCPTimeout, last)
}

// keep renews the lease at half its time (or RenewEvery) until ctx ends. A
// failed renewal is retried sooner; the address stays configured meanwhile
// (a server that NAKs has reassigned it, which the next request will show).
func keep(ctx context.Context, cfg Config, c *nclient4.Client, l Lease) {
	defer c.Close()
	raw := l.raw
	wait := renewAfter(l.Duration, cfg.RenewEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		nl, err := c.Renew(rctx, raw)
		cancel()
		if err != nil {
			cfg.Logger.Warn("DHCP renewal failed", "iface", l.Iface, "err", err)
			wait = max(wait/2, time.Second)
			continue
		}
		raw = nl
		cfg.Logger.Debug("DHCP lease renewed", "iface", l.Iface, "addr", l.Addr.String())
		wait = renewAfter(nl.ACK.IPAddressLeaseTime(l.Duration), cfg.RenewEvery)
	}
}

// renewAfter is T1: half the lease, or every if set and sooner; an
// infinite or unknown lease is renewed hourly.
func renewAfter(lease, every time.Duration) time.Duration {
	t1 := lease / 2
	if lease <= 0 || lease == time.Duration(0xffffffff)*time.Second {
		t1 = time.Hour
	}
	if every > 0 && every < t1 {
		t1 = every
	}
	return max(t1, time.Second)
}

// leaseOf turns an ACK into a Lease.
func leaseOf(ifc net.Interface, l *nclient4.Lease) (Lease, error) {
	ack := l.ACK
	ip := ack.YourIPAddr.To4()
	if ip == nil || ip.IsUnspecified() {
		return Lease{}, fmt.Errorf("DHCP ACK from %s on %s: no address (yiaddr %s)", ack.ServerIPAddr, ifc.Name, ack.YourIPAddr)
	}
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ip.DefaultMask()
	}
	out := Lease{Iface: ifc.Name, MAC: ifc.HardwareAddr, Addr: net.IPNet{IP: ip, Mask: mask},
		DNS: ack.DNS(), ServerID: ack.ServerIdentifier(), Duration: ack.IPAddressLeaseTime(0), raw: l}
	if rs := ack.Router(); len(rs) > 0 && rs[0].To4() != nil && !rs[0].IsUnspecified() {
		out.Router = rs[0].To4()
	}
	return out, nil
}
