package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/boot/httpboot"
	"github.com/ingot-dev/ingot/pkg/boot/ra"
	"github.com/ingot-dev/ingot/pkg/boot/tftp"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Deps are the things Run serves from, made by the caller (cmd/ingot).
type Deps struct {
	Store     store.Store
	Artifacts *artifact.Store
	Recipes   httpboot.RecipeFunc
	// Tokens issues machines' boot credentials (the API server, over
	// pkg/agentauth); nil: none is issued and agent scripts fail.
	Tokens httpboot.TokenIssuer
	Logger *slog.Logger
	// Registry collects every service's metrics and is served at /metrics;
	// nil: a fresh one (with Go and process collectors).
	Registry *prometheus.Registry
	// Mount lets other parts of ingot (the API) add handlers to the same
	// HTTP mux, e.g. Mount: []func(*http.ServeMux){api.Register}. Patterns
	// must not clash with the boot routes: /ipxe, /artifacts/, /boot/,
	// /metrics, /healthz.
	Mount []func(*http.ServeMux)
	// Ready, if set, is called once every socket is bound (tests, systemd notify).
	Ready func(Addrs)
}

// Addrs are the bound addresses, for Ready.
type Addrs struct {
	HTTP     net.Addr
	TFTP     net.Addr // nil when TFTP is off
	ServerIP netip.Addr
}

// noTokens issues nothing: a serve without the API boots no agent.
type noTokens struct{}

func (noTokens) IssueBootCredential(context.Context, *machine.Machine, string, netip.Addr) (string, error) {
	return "", errors.New("this server has no API to issue machine credentials")
}

// service is one supervised part of the process.
type service struct {
	name string
	run  func(ctx context.Context) error
}

// Run builds every enabled service from cfg, binds their sockets (so
// configuration and bind errors surface before anything serves), then
// serves until ctx ends (SIGTERM in cmd/ingot) or one service fails, and
// shuts all of them down gracefully.
func Run(ctx context.Context, cfg Config, d Deps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
		d.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if ll, ok := d.Store.(leaseLogStore); ok {
		if err := d.Registry.Register(leaseLogCollector{ll}); err != nil {
			return fmt.Errorf("registering the lease log metrics: %w", err)
		}
	}
	if d.Tokens == nil {
		d.Tokens = noTokens{}
	}
	serverIP, err := resolveServerIP(cfg.Interface, cfg.ServerIP, interfaceIPv4s)
	if err != nil {
		return err
	}
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http: listening on %s: %w", cfg.HTTPAddr, err)
	}
	defer httpLn.Close()
	publicURL := cfg.PublicURL
	if publicURL == "" {
		publicURL = defaultPublicURL(serverIP, httpLn.Addr())
	}
	bootDirs, err := bootfiles.New([]string{cfg.BootDir, cfg.IPXEDir}, cfg.BootLinkTargets)
	if err != nil && cfg.TFTP {
		return err
	}
	if err != nil {
		d.Logger.Warn("no boot files directory: /boot/ is not served", "err", err)
		bootDirs = nil
	}
	var services []service
	addrs := Addrs{HTTP: httpLn.Addr(), ServerIP: serverIP}

	dsvc, err := newDHCP(cfg, d, serverIP, publicURL)
	if err != nil {
		return err
	}
	if dsvc != nil {
		services = append(services, *dsvc)
	}
	if rsvc := newRA(cfg, d); rsvc != nil {
		services = append(services, *rsvc)
	}
	if cfg.TFTP {
		t, err := tftp.New(tftp.Config{
			Addr:         netip.AddrPortFrom(serverIP, uint16(cfg.TFTPPort)).String(),
			Files:        bootDirs,
			MaxTransfers: cfg.TFTPMaxTransfers,
			MaxBlockSize: cfg.TFTPBlockSize,
			Logger:       d.Logger.With("service", "tftp"),
			Registerer:   d.Registry,
		})
		if err != nil {
			return err
		}
		if addrs.TFTP, err = t.Listen(); err != nil {
			return err
		}
		services = append(services, service{"tftp", t.Serve})
	}
	hb, err := httpboot.New(httpboot.Config{
		ServerURL:  publicURL,
		Machines:   d.Store,
		Recipes:    d.Recipes,
		Tokens:     d.Tokens,
		Artifacts:  d.Artifacts,
		BootFiles:  bootDirs,
		Unknown:    cfg.Unknown,
		Discovery:  httpboot.Discovery{Kernel: cfg.DiscoveryKernel, Initrd: cfg.DiscoveryInitrd, Cmdline: cfg.DiscoveryCmdline},
		Logger:     d.Logger.With("service", "http"),
		Registerer: d.Registry,
		Gatherer:   d.Registry,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	hb.Register(mux)
	for _, m := range d.Mount {
		m(mux)
	}
	services = append(services, service{"http", httpService(httpLn, mux, d.Logger)})

	d.Logger.Info("ingot serving", "interface", cfg.Interface, "server_ip", serverIP, "http", httpLn.Addr().String(),
		"public_url", publicURL, "dhcp", cfg.DHCP, "tftp", cfg.TFTP)
	if d.Ready != nil {
		d.Ready(addrs)
	}
	err = supervise(ctx, d.Logger, services)
	d.Logger.Info("ingot stopped", "err", err)
	return err
}

// newDHCP builds the DHCP service; nil when DHCP is off.
func newDHCP(cfg Config, d Deps, serverIP netip.Addr, publicURL string) (*service, error) {
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
		Logger:     d.Logger.With("service", "dhcp"),
		Registerer: d.Registry,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	return &service{"dhcp", srv.Serve}, nil
}

// newRA builds the router advertisement responder on the boot interface.
// It is an optimisation (iPXE boots ~14 s faster), so a host without IPv6
// or raw sockets runs without it, with a warning.
func newRA(cfg Config, d Deps) *service {
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
	r, err := ra.New(ra.Config{Interface: cfg.Interface, Prefix: prefix, Logger: d.Logger.With("service", "ra")})
	if err == nil {
		err = r.Listen()
	}
	if err != nil {
		d.Logger.Warn("no router advertisements: iPXE will wait ~14 s for IPv6 before booting", "err", err)
		return nil
	}
	return &service{"ra", r.Serve}
}

// httpService serves mux on ln until ctx ends, then drains for up to 10s.
func httpService(ln net.Listener, h http.Handler, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
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

// supervise runs every service until ctx ends or one of them fails (or
// stops on its own), then cancels the rest and waits for all.
func supervise(ctx context.Context, log *slog.Logger, services []service) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, s := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.run(ctx)
			if err == nil && ctx.Err() == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil {
				once.Do(func() { first = fmt.Errorf("%s: %w", s.name, err) })
				log.Error("service failed; stopping the others", "service", s.name, "err", err)
				cancel()
				return
			}
			log.Info("service stopped", "service", s.name)
		}()
	}
	wg.Wait()
	return first
}

// defaultPublicURL is http://SERVER-IP:PORT, or loopback when no boot
// interface is configured (HTTP-only mode).
func defaultPublicURL(serverIP netip.Addr, httpAddr net.Addr) string {
	port := "80"
	if ta, ok := httpAddr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
	}
	host := "127.0.0.1"
	if serverIP.IsValid() {
		host = serverIP.String()
	}
	return "http://" + net.JoinHostPort(host, port)
}
