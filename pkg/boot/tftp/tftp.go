// Package tftp is ingot's read-only TFTP server for the first boot stage:
// firmware PXE fetches an iPXE binary (undionly.kpxe, snponly.efi, ipxe.efi)
// and iPXE continues over HTTP.
//
// It speaks the read side of TFTP (RFC 1350, with the options of RFC
// 2347-2349 and 7440): names are validated and opened through bootfiles (no
// "..", no absolute paths, no symlink escapes, regular files only), writes
// are refused, tsize, blksize and windowsize are answered (window.go), and
// every transfer is logged and counted.
//
// A read request is one UDP datagram from an address anyone can forge, so
// transfers are bounded before anything is sent: MaxTransfers at once,
// MaxPerClient per client address (see slots), and a new transfer whose
// first packet is not acknowledged within FirstACKWait ends silently and
// frees its slot, having sent at most two datagrams (see firstSends for the
// bound). Requests over a limit get no answer, never an ERROR: a client
// whose request goes unanswered retransmits it and is served once a slot is
// free, while tftp-hpa, curl, iPXE and PXE ROMs give up on an ERROR (a
// failed boot), and an ERROR sent to a forged address is reflection.
//
// It wrapped github.com/pin/tftp/v3 until that hardening. That server
// opens a socket and starts the handler for every request before the
// handler can refuse it, answers every refusal with an ERROR, and has one
// timeout and retry count, with up to 1 s of random backoff per retry, for
// the whole transfer: a request never acknowledged held a slot for 12-17 s
// and drew six copies of its first packet. Its netascii converter is still
// used. One choice is kept from it: blksize is capped at the receiving
// interface's MTU less the IP and UDP headers, so blocks are never
// IP-fragmented on the boot network (MaxBlockSize caps it further).
package tftp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
)

// Config configures a Server.
type Config struct {
	// Addr is IP:PORT to bind, e.g. 10.77.0.1:69. The IP must be a specific
	// address (the boot interface's), never 0.0.0.0.
	Addr string
	// Files is where files are served from.
	Files *bootfiles.Dirs
	// MaxTransfers bounds concurrent transfers. A request that finds them
	// all running waits, unanswered, for a free slot, in order of arrival
	// (up to 16 x MaxTransfers of them); a client that sends it again
	// while it waits keeps its place and goes before requests never
	// repeated (forged ones never are), and a request whose client has not
	// asked again for max(2 x FirstACKWait, 10 s) is dropped (see slots).
	// Zero means 64.
	MaxTransfers int
	// MaxPerClient bounds the transfers, running or waiting, of one client
	// IP address; further requests from it get no answer. Zero means 4: a
	// boot loader fetches one file at a time, EDK2's tsize probe and its
	// fetch overlap for a moment, and a retransmitted request may start a
	// second transfer before the first ends.
	MaxPerClient int
	// FirstACKWait is how long a new transfer waits for the client's first
	// ACK (of the OACK, or of DATA 1) before it ends silently and frees its
	// slot. Its first packet is sent at 0 and again at FirstACKWait/2. Zero
	// means 2s: a live client on a boot network answers within
	// milliseconds, and 2 s still covers one lost packet.
	FirstACKWait time.Duration
	// MaxBlockSize caps the negotiated blksize (it is also capped at the
	// interface MTU - 28). Zero means 65464.
	MaxBlockSize int
	// Timeout per round trip once the client has answered (zero: 2s), and
	// Retries per packet (zero: 5).
	Timeout    time.Duration
	Retries    int
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
	Now        func() time.Time
}

// Server is a read-only TFTP server.
type Server struct {
	cfg   Config
	addr  netip.AddrPort
	log   *slog.Logger
	m     metrics
	slots *slots
	wg    sync.WaitGroup // running transfers

	mu       sync.Mutex
	conn     *net.UDPConn
	self     netip.AddrPort // conn's address, with the port bound
	lastBusy time.Time      // last "every slot busy" warning
}

type metrics struct {
	transfers *prometheus.CounterVec
	bytes     prometheus.Counter
	duration  prometheus.Histogram
}

// New checks cfg and builds a Server; Listen and Serve start it.
func New(cfg Config) (*Server, error) {
	ap, err := netip.ParseAddrPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("tftp: address %q: expected IP:PORT of the boot interface: %w", cfg.Addr, err)
	}
	if ap.Addr().IsUnspecified() {
		return nil, fmt.Errorf("tftp: address %q is unspecified; bind the boot interface's own address", cfg.Addr)
	}
	if cfg.Files == nil {
		return nil, errors.New("tftp: no boot files directory configured")
	}
	cfg = withDefaults(cfg)
	return &Server{
		cfg: cfg, addr: ap, log: cfg.Logger, m: newMetrics(cfg.Registerer),
		slots: slotsFor(cfg),
	}, nil
}

func withDefaults(cfg Config) Config {
	if cfg.MaxTransfers <= 0 {
		cfg.MaxTransfers = 64
	}
	if cfg.MaxPerClient <= 0 {
		cfg.MaxPerClient = 4
	}
	if cfg.FirstACKWait <= 0 {
		cfg.FirstACKWait = 2 * time.Second
	}
	if cfg.MaxBlockSize <= 0 || cfg.MaxBlockSize > maxBlock {
		cfg.MaxBlockSize = maxBlock
	}
	cfg.MaxBlockSize = max(cfg.MaxBlockSize, defaultBlock)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// A waiting request costs a few hundred bytes and no packet: room for a
// rack's worth per slot (a thousand at the default MaxTransfers). One
// whose client has been quiet for waitQuiet has given up: boot clients ask
// again every few seconds (EDK2 4 s, tftp-hpa 5 s).
const (
	waitingPerSlot = 16
	waitQuiet      = 10 * time.Second
)

// slotsFor is the admission of a server configured by cfg (defaults set).
func slotsFor(cfg Config) *slots {
	return newSlots(cfg.MaxTransfers, cfg.MaxPerClient, waitingPerSlot*cfg.MaxTransfers, max(2*cfg.FirstACKWait, waitQuiet))
}

// results are the values of ingot_tftp_transfers_total's result label.
var results = []string{"ok", "error", "aborted", "refused", "busy", "client_limit", "no_ack", "repeat"}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingot_tftp_transfers_total",
			Help: "TFTP requests by result: ok; error; aborted (client stopped, e.g. EDK2 after the tsize OACK); " +
				"refused (no such file, or a write); busy (dropped unanswered: every slot taken); " +
				"client_limit (dropped unanswered: too many transfers for the client address); " +
				"no_ack (first packet never acknowledged: lost client or spoofed request); " +
				"repeat (a request sent again while it waits for a slot: it keeps its place, no second transfer).",
		}, []string{"result"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ingot_tftp_bytes_total", Help: "File bytes sent over TFTP.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ingot_tftp_transfer_duration_seconds", Help: "Duration of completed TFTP transfers.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.transfers, m.bytes, m.duration)
	}
	for _, r := range results {
		m.transfers.WithLabelValues(r)
	}
	return m
}

func (s *Server) count(result string) { s.m.transfers.WithLabelValues(result).Inc() }

// Listen binds the UDP socket (so bind errors surface before Serve).
func (s *Server) Listen() (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn.LocalAddr(), nil
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(s.addr))
	if err != nil {
		return nil, fmt.Errorf("tftp: listening on %s: %w", s.addr, err)
	}
	// Ask for each datagram's interface at bind time, not when Serve starts:
	// a request that arrived in between would carry no interface, and its
	// blksize would be held to 512 (seen with EDK2's first RRQ).
	if s.is4() {
		err = ipv4.NewPacketConn(conn).SetControlMessage(ipv4.FlagInterface, true)
	} else {
		err = ipv6.NewPacketConn(conn).SetControlMessage(ipv6.FlagInterface, true)
	}
	if err != nil {
		s.log.Warn("tftp: no per-packet interface info; blksize stays at 512", "err", err)
	}
	s.conn = conn
	s.self = conn.LocalAddr().(*net.UDPAddr).AddrPort()
	return conn.LocalAddr(), nil
}

func (s *Server) is4() bool { return s.addr.Addr().Unmap().Is4() }

// Serve answers requests until ctx ends, then waits for running transfers
// (each bounded by Timeout x (Retries+1) per packet) and returns.
func (s *Server) Serve(ctx context.Context) error {
	addr, err := s.Listen()
	if err != nil {
		return err
	}
	s.log.Info("tftp listening", "addr", addr.String(), "roots", s.cfg.Files.Roots(),
		"max_transfers", s.cfg.MaxTransfers, "max_per_client", s.cfg.MaxPerClient, "first_ack_wait", s.cfg.FirstACKWait)
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	err = s.loop()
	ownErr := stop() // the loop ended on its own, not because ctx ended
	if ownErr {
		s.conn.Close()
	}
	s.slots.close() // requests still waiting are dropped: their clients retransmit
	s.wg.Wait()
	if ownErr {
		return fmt.Errorf("tftp: serving on %s: %w", addr, err)
	}
	return nil
}

// loop reads requests until the socket is closed.
func (s *Server) loop() error {
	b := make([]byte, maxRequest+1) // one more: a longer datagram is dropped, not truncated
	var oob []byte
	if s.is4() {
		oob = ipv4.NewControlMessage(ipv4.FlagInterface)
	} else {
		oob = ipv6.NewControlMessage(ipv6.FlagInterface)
	}
	for {
		n, oobn, _, src, err := s.conn.ReadMsgUDPAddrPort(b, oob)
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		if err != nil {
			s.log.Debug("tftp: reading a request", "err", err)
			continue
		}
		s.handle(b[:n], src, s.ifIndex(oob[:oobn]))
	}
}

// ifIndex is the interface index in a datagram's control message; 0: none.
func (s *Server) ifIndex(oob []byte) int {
	if s.is4() {
		var cm ipv4.ControlMessage
		if cm.Parse(oob) == nil {
			return cm.IfIndex
		}
		return 0
	}
	var cm ipv6.ControlMessage
	if cm.Parse(oob) == nil {
		return cm.IfIndex
	}
	return 0
}

// handle decides what one datagram on the listening socket gets.
func (s *Server) handle(b []byte, src netip.AddrPort, ifIndex int) {
	if !answerable(src, s.self) {
		return
	}
	req, err := parseRequest(b)
	if err != nil {
		s.log.Debug("tftp: dropped a datagram", "client", src.String(), "err", err)
		return
	}
	if req.op == opWRQ {
		s.count("refused")
		s.log.Debug("tftp refused a write", "client", src.String(), "file", req.name)
		s.conn.WriteToUDPAddrPort(appendError(nil, codeAccess, "read-only server"), src)
		return
	}
	j := &job{client: src, ifIndex: ifIndex, req: req, since: s.cfg.Now()}
	v, dropped := s.slots.admit(j)
	if dropped != nil {
		s.busy(dropped)
	}
	switch v {
	case admitRun:
		s.wg.Add(1)
		go s.serveJobs(j)
	case admitRepeat:
		s.count("repeat")
	case admitFull:
		s.busy(j)
	case admitClientLimit:
		s.count("client_limit")
		s.log.Debug("tftp: too many transfers for this client; request dropped", "client", src.String(),
			"file", req.name, "max_per_client", s.cfg.MaxPerClient)
	}
}

// answerable reports whether a request from src may be answered at all:
// never to a multicast, broadcast or unspecified address, port 0, or the
// server's own socket (a forged request must not start a loop).
func answerable(src, self netip.AddrPort) bool {
	a := src.Addr().Unmap()
	return src.Port() != 0 && a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255}) &&
		netip.AddrPortFrom(a, src.Port()) != netip.AddrPortFrom(self.Addr().Unmap(), self.Port())
}

// serveJobs runs j's transfer, then those its slot passes to.
func (s *Server) serveJobs(j *job) {
	defer s.wg.Done()
	for j != nil {
		s.transfer(j)
		var expired []*job
		j, expired = s.slots.release(j, s.cfg.Now())
		for _, e := range expired {
			s.busy(e)
		}
	}
}

// busy counts a request dropped unanswered for want of a slot, and warns
// at most every 10 s: a flood must not flood the log as well.
func (s *Server) busy(j *job) {
	s.count("busy")
	now := s.cfg.Now()
	s.mu.Lock()
	quiet := now.Sub(s.lastBusy) < 10*time.Second
	if !quiet {
		s.lastBusy = now
	}
	s.mu.Unlock()
	log := s.log.Warn
	if quiet {
		log = s.log.Debug
	}
	log("tftp: every transfer slot busy; dropped a waiting request unanswered (its client retransmits)",
		"client", j.client.String(), "file", j.req.name, "max_transfers", s.cfg.MaxTransfers)
}

// clientError is the ERROR packet the client gets for a file it cannot
// have: no server paths, and a file outside the boot folders looks exactly
// like a missing one (the client learns nothing about what exists
// elsewhere).
func clientError(err error) []byte {
	if errors.Is(err, bootfiles.ErrBadPath) {
		return appendError(nil, codeAccess, "access violation")
	}
	return appendError(nil, codeNotFound, "file not found")
}
