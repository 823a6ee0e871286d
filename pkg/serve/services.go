package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/boot/ra"
	"github.com/ingot-dev/ingot/pkg/connlimit"
)

// newDHCP builds the DHCP service; nil when DHCP is off.
func newDHCP(cfg Config, d Deps, serverIP netip.Addr, publicURL string) (Service, error) {
	if cfg.DHCP == "off" {
		return nil, nil
	}
	var pools []dhcp.Pool
	for _, s := range cfg.Pools {
		p, err := dhcp.ParsePool(s)
		if err != nil {
			return nil, err
		}
		pools = append(pools, p)
	}
	srv, err := dhcp.NewServer(dhcp.Config{
		Interface:  cfg.Interface,
		ServerIP:   serverIP,
		Mode:       cfg.DHCP,
		Pools:      pools,
		HTTPBase:   publicURL,
		Unknown:    cfg.Unknown,
		LeaseTime:  cfg.LeaseTime,
		Store:      d.Store,
		Discover:   d.Discover,
		Logger:     d.Logger.With("service", "dhcp"),
		Registerer: d.Registry,
		Active:     d.DHCPActive,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	return Critical(ServiceFunc("dhcp", srv.Serve)), nil
}

// newRA builds the router advertisement responder on the boot interface.
// It is an optimisation (iPXE boots ~14 s faster), so a host without IPv6
// or raw sockets runs without it, with a warning. Unlike the listeners it
// restarts when it stops: each restart opens a fresh socket.
func newRA(cfg Config, d Deps) Service {
	if !cfg.RA || cfg.Interface == "" {
		return nil
	}
	var prefix netip.Prefix
	if cfg.RAPrefix != "" {
		p, err := netip.ParsePrefix(cfg.RAPrefix)
		if err != nil {
			d.Logger.Warn("no router advertisements: --ra-prefix", "err", err)
			return nil
		}
		prefix = p
	}
	rcfg := ra.Config{Interface: cfg.Interface, Prefix: prefix, Logger: d.Logger.With("service", "ra")}
	r, err := listenRA(rcfg)
	if err != nil {
		d.Logger.Warn("no router advertisements: iPXE will wait ~14 s for IPv6 before booting", "err", err)
		return nil
	}
	return ServiceFunc("ra", func(ctx context.Context) error {
		if r == nil { // a restart: the last Serve closed its socket
			if r, err = listenRA(rcfg); err != nil {
				return err
			}
		}
		defer func() { r = nil }()
		return r.Serve(ctx)
	})
}

// listenRA makes a responder and opens its socket.
func listenRA(cfg ra.Config) (*ra.Responder, error) {
	r, err := ra.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := r.Listen(); err != nil {
		return nil, err
	}
	return r, nil
}

// httpService serves mux on ln until ctx ends, then drains for up to 10s.
// Slow or idle clients are cut by the timeouts, and one client address
// holds at most cfg.HTTPMaxConnsPerClient connections.
func httpService(ln net.Listener, h http.Handler, cfg Config, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: min(10*time.Second, cfg.HTTPReadTimeout),
			ReadTimeout: cfg.HTTPReadTimeout, WriteTimeout: cfg.HTTPWriteTimeout, IdleTimeout: cfg.HTTPIdleTimeout,
			MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		if cfg.HTTPMaxConnsPerClient > 0 {
			ln = connlimit.PerClient(ln, cfg.HTTPMaxConnsPerClient, log)
		}
		done := make(chan error, 1)
		stop := context.AfterFunc(ctx, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done <- srv.Shutdown(sctx)
		})
		defer stop()
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return <-done
		}
		return err
	}
}
