// Package tftp is ingot's read-only TFTP server for the first boot stage:
// firmware PXE fetches an iPXE binary (undionly.kpxe, snponly.efi, ipxe.efi)
// and iPXE continues over HTTP.
//
// It wraps github.com/pin/tftp/v3 with what a boot server needs: names are
// validated and opened through bootfiles (no "..", no absolute paths, no
// symlink escapes, regular files only), writes are refused, tsize and blksize
// are answered, concurrent transfers are bounded, and every transfer is
// logged and counted.
//
// Library limits (pin/tftp v3.1.0):
//   - blksize is clamped inside the library to the receiving interface's
//     MTU - 28 (IPv4), with no option to lift it; SetBlockSize can only lower
//     it. The clamp keeps blocks from being IP-fragmented, which is what we
//     want on a boot network, so we leave it (MaxBlockSize caps it further).
//   - windowsize (RFC 7440) is not negotiated: the sender drops every option
//     but blksize and tsize from the OACK, so clients (EDK2 asks windowsize 4)
//     fall back to lock-step, which RFC 7440 allows. It cannot be added from
//     outside: the sender, its options and OACK packing are unexported, and
//     ReadFrom is the only entry point. The library's "anticipate" mode is not
//     a substitute: it sends a window without negotiating and then waits for
//     an ACK of every block, while an RFC 7440 client ACKs only the last block
//     of each window, so it would stall on timeouts. Adding it means patching
//     sender.go (a fork or upstream change, ~150 lines): accept "windowsize"
//     in sendOptions and echo min(asked, server max) in the OACK; send w
//     blocks, then wait for one ACK n meaning "all blocks up to n", slide to
//     n+1 modulo 2^16 (rollover), resend from n+1 on timeout or on an ACK of
//     an earlier block; finish on the short block's ACK.
//   - every TFTP error is sent with code 1 (the library's abort), whatever
//     the cause; the message says "access violation" or "file not found".
package tftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	ptftp "github.com/pin/tftp/v3"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/ipv4"

	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
)

// Config configures a Server.
type Config struct {
	// Addr is IP:PORT to bind, e.g. 10.77.0.1:69. The IP must be a specific
	// address (the boot interface's), never 0.0.0.0.
	Addr string
	// Files is where files are served from.
	Files *bootfiles.Dirs
	// MaxTransfers bounds concurrent transfers; further requests get a TFTP
	// error. Zero means 64.
	MaxTransfers int
	// MaxBlockSize caps the negotiated blksize (the library also clamps it to
	// the interface MTU - 28). Zero means 65464.
	MaxBlockSize int
	// Timeout per round trip (zero: 2s) and Retries per packet (zero: 5).
	Timeout time.Duration
	Retries int
	// Anticipate, when > 1, enables the library's experimental sender window
	// (sends that many blocks before waiting for an ACK, without negotiating
	// windowsize). Off by default: not RFC 7440.
	Anticipate uint
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
	Now        func() time.Time
}

// Server is a read-only TFTP server.
type Server struct {
	cfg  Config
	addr netip.AddrPort
	log  *slog.Logger
	sem  chan struct{}
	m    metrics
	srv  *ptftp.Server

	mu   sync.Mutex
	conn *net.UDPConn
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
	if cfg.MaxTransfers <= 0 {
		cfg.MaxTransfers = 64
	}
	if cfg.MaxBlockSize <= 0 {
		cfg.MaxBlockSize = 65464
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, addr: ap, log: cfg.Logger, sem: make(chan struct{}, cfg.MaxTransfers), m: newMetrics(cfg.Registerer)}
	s.srv = ptftp.NewServer(s.read, nil) // nil write handler: WRQ refused by the library
	s.srv.SetTimeout(cfg.Timeout)
	s.srv.SetRetries(cfg.Retries)
	s.srv.SetBlockSize(cfg.MaxBlockSize)
	s.srv.SetAnticipate(cfg.Anticipate)
	return s, nil
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingot_tftp_transfers_total",
			Help: "TFTP read requests by result: ok, error, aborted (client stopped, e.g. EDK2 after the tsize OACK), refused, busy.",
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
	for _, r := range []string{"ok", "error", "aborted", "refused", "busy"} {
		m.transfers.WithLabelValues(r)
	}
	return m
}

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
	// Ask for each datagram's destination and interface now, not when the
	// library's Serve does: a request that arrives in between would carry
	// no control message, and the library then assumes a 512-byte MTU
	// limit and clamps blksize to 512 (seen with EDK2's first RRQ).
	if s.addr.Addr().Is4() {
		if err := ipv4.NewPacketConn(conn).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
			s.log.Warn("tftp: no per-packet interface info; blksize stays at 512", "err", err)
		}
	}
	s.conn = conn
	return conn.LocalAddr(), nil
}

// Serve answers requests until ctx ends, then waits for running transfers
// (each bounded by Timeout x Retries) and returns.
func (s *Server) Serve(ctx context.Context) error {
	addr, err := s.Listen()
	if err != nil {
		return err
	}
	s.log.Info("tftp listening", "addr", addr.String(), "roots", s.cfg.Files.Roots())
	shut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { s.srv.Shutdown(); close(shut) })
	err = s.srv.Serve(s.conn)
	if stop() { // Serve ended on its own, not by Shutdown
		return fmt.Errorf("tftp: serving on %s: %w", addr, err)
	}
	<-shut // Shutdown waits for running transfers
	return nil
}

// read is the library's read handler: one goroutine per RRQ.
func (s *Server) read(name string, rf io.ReaderFrom) error {
	start := s.cfg.Now()
	client := ""
	if ot, ok := rf.(ptftp.OutgoingTransfer); ok {
		ra := ot.RemoteAddr()
		client = ra.String()
	}
	log := s.log.With("client", client, "file", name)
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	default:
		s.m.transfers.WithLabelValues("busy").Inc()
		log.Warn("tftp refused: too many transfers", "max", s.cfg.MaxTransfers)
		return fmt.Errorf("server busy, retry later")
	}
	f, err := s.cfg.Files.Open(name)
	if err != nil {
		s.m.transfers.WithLabelValues("refused").Inc()
		log.Info("tftp refused", "err", err)
		return clientError(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		if ot, ok := rf.(ptftp.OutgoingTransfer); ok {
			ot.SetSize(fi.Size()) // answer tsize (EDK2 asks for it first)
		}
	}
	n, err := rf.ReadFrom(f)
	d := s.cfg.Now().Sub(start)
	s.m.bytes.Add(float64(n))
	switch {
	case err == nil:
		s.m.transfers.WithLabelValues("ok").Inc()
		s.m.duration.Observe(d.Seconds())
		log.Info("tftp sent", "bytes", n, "duration", d)
	case n == 0:
		// The client stopped after the OACK. EDK2 does this on purpose: it asks
		// tsize, aborts (error 8), then asks again. Normal; debug only.
		s.m.transfers.WithLabelValues("aborted").Inc()
		log.Debug("tftp aborted by client after options", "err", err, "duration", d)
	default:
		s.m.transfers.WithLabelValues("error").Inc()
		log.Warn("tftp transfer failed", "bytes", n, "duration", d, "err", err)
	}
	return nil // ReadFrom already sent the client an ERROR where needed
}

// clientError is what the client is told: no server paths, and a file
// outside the boot folders looks exactly like a missing one (the client
// learns nothing about what exists elsewhere).
func clientError(err error) error {
	if errors.Is(err, bootfiles.ErrBadPath) {
		return errors.New("access violation")
	}
	return errors.New("file not found")
}
