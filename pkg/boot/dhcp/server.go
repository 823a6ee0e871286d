package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"golang.org/x/sys/unix"
)

// maxInFlight bounds the requests decided at once: the workers. Concurrent
// requests share the store's group commit, so a boot storm is committed in
// few fsyncs; a round takes ~0.3 ms, so 64 workers commit far more leases
// per second than the sockets carry (512 spent more on idle goroutine
// stacks, shrunk by the GC and regrown, than they saved).
const maxInFlight = 64

// Server is the socket layer: it reads requests on Config.Interface only
// (SO_BINDTODEVICE), asks the Handler, and sends replies.
type Server struct {
	cfg   Config
	h     *Handler
	conns []*net.UDPConn // port 67, then 4011 in proxy mode
	ports []int

	noUnicast sync.Once // warned that ARP entries cannot be written
}

// NewServer checks cfg and resolves the server address from the interface
// when cfg.ServerIP is unset. It does not open sockets: Listen does. Call
// both inside the network namespace that holds the interface.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Interface == "" {
		return nil, errors.New("DHCP needs an explicit --interface: it never answers on an interface it was not given")
	}
	if cfg.Mode != ModeOff && !cfg.ServerIP.IsValid() {
		ip, err := interfaceIPv4(cfg.Interface)
		if err != nil {
			return nil, err
		}
		cfg.ServerIP = ip
	}
	h, err := NewHandler(cfg)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: h.cfg, h: h}, nil
}

// Handler returns the decision function the server uses.
func (s *Server) Handler() *Handler { return s.h }

// Listen opens the sockets: UDP 67 and, in proxy mode, 4011, each bound to
// the interface. Serve calls it when it has not been called.
func (s *Server) Listen() error {
	if s.conns != nil || s.cfg.Mode == ModeOff {
		return nil
	}
	ports := []int{dhcpv4.ServerPort}
	if s.cfg.Mode == ModeProxy {
		ports = append(ports, PXEPort)
	}
	for _, p := range ports {
		c, err := server4.NewIPv4UDPConn(s.cfg.Interface, &net.UDPAddr{Port: p})
		if err != nil {
			s.close()
			return fmt.Errorf("dhcp: listening on %s port %d: %w", s.cfg.Interface, p, err)
		}
		growBuffers(c)
		s.conns, s.ports = append(s.conns, c), append(s.ports, p)
	}
	return nil
}

// readBuffer holds a boot storm's requests while the handlers catch up
// (the default ~200 KiB holds about a hundred packets). writeBuffer holds
// the replies the kernel keeps while it resolves their destination by ARP
// (unicasts to ciaddr or giaddr): ~3 s each when nobody answers, as for a
// forged ciaddr.
const readBuffer, writeBuffer = 4 << 20, 4 << 20

// growBuffers raises the socket's buffers past net.core.[rw]mem_max when
// we may (CAP_NET_ADMIN), else as far as those allow.
func growBuffers(c *net.UDPConn) {
	if rc, err := c.SyscallConn(); err == nil {
		var rerr, werr error
		if err := rc.Control(func(fd uintptr) {
			rerr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, readBuffer)
			werr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, writeBuffer)
		}); err == nil && rerr == nil && werr == nil {
			return
		}
	}
	_ = c.SetReadBuffer(readBuffer)
	_ = c.SetWriteBuffer(writeBuffer)
}

// sendNow sends b to to, or fails at once with EAGAIN when the socket's
// send buffer is full. It never waits: replies to forged addresses wait
// seconds in the kernel's ARP queue, charged to this socket, and a worker
// blocked behind them would stop every client's decisions, not just the
// forger's. The client of a reply dropped here asks again.
func sendNow(c *net.UDPConn, b []byte, to netip.AddrPort) error {
	if !to.Addr().Unmap().Is4() {
		return fmt.Errorf("sending to %s: not an IPv4 address", to)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	sa := &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().Unmap().As4()}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, unix.MSG_DONTWAIT, sa)
		return true // done, whatever happened: never wait for the socket to drain
	}); err != nil {
		return err
	}
	return serr
}

func (s *Server) close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// Serve answers requests until ctx is cancelled, then closes its sockets,
// waits for requests in flight (their leases are committed) and returns nil.
func (s *Server) Serve(ctx context.Context) error {
	if s.cfg.Mode == ModeOff {
		<-ctx.Done()
		return nil
	}
	if err := s.Listen(); err != nil {
		return err
	}
	s.cfg.Logger.Info("dhcp serving", "interface", s.cfg.Interface, "server", s.cfg.ServerIP, "mode", s.cfg.Mode)
	stop := context.AfterFunc(ctx, s.close)
	defer stop()
	// Long-lived workers, not a goroutine per packet: their stacks stay
	// grown (per-packet goroutines spent 15% of the CPU growing stacks).
	work := make(chan job, 4*maxInFlight)
	copies := newCopies()
	var workers sync.WaitGroup
	for range maxInFlight {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range work {
				if copies.stale(j, time.Now()) {
					// Overload: the client has sent it again, and
					// answering late only delays the fresh requests.
					s.h.metrics.stale(j.req)
					continue
				}
				s.answer(ctx, j.conn, j.req, j.in)
			}
		}()
	}
	var readers sync.WaitGroup
	errs := make(chan error, len(s.conns))
	for i, c := range s.conns {
		readers.Add(1)
		go func() {
			defer readers.Done()
			errs <- s.loop(ctx, c, s.ports[i], work, copies)
		}()
	}
	readers.Wait()
	close(work)
	workers.Wait()
	s.close()
	close(errs)
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

type job struct {
	conn *net.UDPConn
	req  *dhcpv4.DHCPv4
	in   Meta
	at   time.Time // received
}

func (s *Server) loop(ctx context.Context, c *net.UDPConn, port int, work chan<- job, copies *copies) error {
	buf := make([]byte, 1500)
	for {
		n, peer, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dhcp: reading on %s port %d: %w", s.cfg.Interface, port, err)
		}
		req, err := dhcpv4.FromBytes(buf[:n]) // copies what it keeps
		if err != nil {
			s.cfg.Logger.Debug("dhcp undecodable packet", "peer", peer, "err", err)
			continue
		}
		j := job{conn: c, req: req, in: Meta{Port: port, Peer: netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())},
			at: time.Now()}
		copies.arrived(j)
		work <- j
	}
}

func (s *Server) answer(ctx context.Context, c *net.UDPConn, req *dhcpv4.DHCPv4, in Meta) {
	// The decision runs to completion even when ctx ends meanwhile: a lease
	// being committed is finished, not abandoned.
	reply, err := s.h.Handle(context.WithoutCancel(ctx), req, in)
	if err != nil || reply == nil {
		return
	}
	d := Destination(req, reply, in)
	to := d.Addr
	if d.HW != nil {
		// Unicast to a client without an address: ARP entry first (neigh.go).
		if err := setNeighbor(c, s.cfg.Interface, d.Addr.Addr(), d.HW); err != nil {
			s.noUnicast.Do(func() {
				s.cfg.Logger.Warn("dhcp cannot unicast to clients without an address; broadcasting those replies", "err", err)
			})
			to = broadcast68
		}
	}
	if err := sendNow(c, reply.ToBytes(), to); err != nil {
		s.h.metrics.unsent(reply)
		if errors.Is(err, unix.EAGAIN) {
			s.cfg.Logger.Debug("dhcp send buffer full; reply dropped", "mac", req.ClientHWAddr.String(), "to", to)
			return
		}
		s.cfg.Logger.Warn("dhcp sending reply", "mac", req.ClientHWAddr.String(), "to", to, "err", err)
	}
}

// interfaceIPv4 returns the first IPv4 address of the named interface.
func interfaceIPv4(name string) (netip.Addr, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("dhcp interface %s: %w", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("dhcp interface %s: reading addresses: %w", name, err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("dhcp interface %s has no IPv4 address: give it one or set the server IP", name)
}
