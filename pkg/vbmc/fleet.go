package vbmc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Serve answers HTTP (or HTTPS when tlsConf is set) on ln with h until ctx
// is done. Requests see ctx as their base, so hung endpoints end with it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, tlsConf *tls.Config) error {
	srv := newServer(ctx, h)
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serving %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdown(srv)
	<-done
	return nil
}

func newServer(ctx context.Context, h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if b, ok := h.(*BMC); ok {
		// TLS handshake failures and the like, at debug like the request log.
		srv.ErrorLog = slog.NewLogLogger(b.log.Handler(), slog.LevelDebug)
	}
	return srv
}

// shutdown lets answers in progress finish for a moment, then cuts the rest.
func shutdown(srv *http.Server) {
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
}

// Fleet is many independent BMCs on loopback, one port each, sharing one
// loaded mockup tree (each keeps its own state).
type Fleet struct {
	URLs []string // base URLs, "http://127.0.0.1:PORT"
	BMCs []*BMC

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewMany makes n independent BMCs from cfg that share one loaded mockup
// tree (each keeps its own state); BMC i gets Seed cfg.Seed+i. A Backend
// drives one machine, so cfg.Backend must be nil when n > 1.
func NewMany(cfg Config, n int) ([]*BMC, error) {
	if n < 1 {
		return nil, fmt.Errorf("making virtual BMCs: count %d: expected at least 1", n)
	}
	if cfg.Backend != nil && n > 1 {
		return nil, errors.New("making virtual BMCs: a Backend drives one machine; use count 1 or no Backend")
	}
	t, err := loadTree(cfg.Root)
	if err != nil {
		return nil, err
	}
	out := make([]*BMC, 0, n)
	for i := range n {
		c := cfg
		c.Seed = cfg.Seed + int64(i)
		b, err := newBMC(c, t)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// StartFleet starts n BMCs from cfg on 127.0.0.1 ephemeral ports. BMC i gets
// Seed cfg.Seed+i. A Backend drives one machine, so cfg.Backend must be nil
// when n > 1. Close stops them all.
func StartFleet(ctx context.Context, n int, cfg Config) (*Fleet, error) {
	bmcs, err := NewMany(cfg, n)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &Fleet{cancel: cancel}
	for i, b := range bmcs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("starting virtual BMC %d of %d: %w", i+1, n, err)
		}
		f.BMCs = append(f.BMCs, b)
		f.URLs = append(f.URLs, "http://"+ln.Addr().String())
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_ = Serve(ctx, ln, b, nil)
		}()
	}
	return f, nil
}

// Close stops every BMC of the fleet and waits for them.
func (f *Fleet) Close() {
	f.cancel()
	f.wg.Wait()
}

// StartMany starts n BMCs (see StartFleet) and returns their base URLs and
// a function that stops them.
func StartMany(ctx context.Context, n int, cfg Config) ([]string, func(), error) {
	f, err := StartFleet(ctx, n, cfg)
	if err != nil {
		return nil, nil, err
	}
	return f.URLs, f.Close, nil
}
