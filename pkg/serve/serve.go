package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/boot/httpboot"
	"github.com/ingot-dev/ingot/pkg/boot/tftp"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// Deps are the things Run serves from, made by the caller (cmd/ingot).
type Deps struct {
	Store store.Store
	// Discover records unknown network-boot clients (--unknown discover):
	// the fleet service.
	Discover  dhcp.Discoverer
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
	// /vmedia/, /metrics, /healthz.
	Mount []func(*http.ServeMux)
	// Media builds the agent's boot CDs (the engine's Media, made before
	// the engine); Run tells it the server's URLs and serves its CDs on
	// the boot listener at /vmedia/. nil: no virtual media.
	Media *VirtualMedia
	// Ready, if set, is called once every socket is bound (tests, systemd notify).
	Ready func(Addrs)
	// Reload delivers SIGHUP: the API certificate is loaded again.
	Reload <-chan os.Signal
	// PublicLimit bounds /ipxe per client address (share it with the API's
	// credential-less routes); nil: one from cfg.PublicRate.
	PublicLimit *ratelimit.Limiter
	// Services are the other long-running parts of the process (the
	// engine, pollers), run by the same Supervisor as the boot services
	// once every socket is bound, e.g. serve.ServiceFunc("engine", e.Run).
	// Each is started again when it stops unless wrapped in Critical; see
	// Service for the contract.
	Services []Service
}

// Addrs are the bound addresses, for Ready.
type Addrs struct {
	HTTP     net.Addr
	API      net.Addr // the API's HTTPS listener; nil with --api-addr ''
	APIURL   string   // how machines reach the API ("" with --api-addr '')
	CA       string   // the fingerprint machines pin (pkg/tlsca)
	TFTP     net.Addr // nil when TFTP is off
	ServerIP netip.Addr
}

// noTokens issues nothing: a serve without the API boots no agent.
type noTokens struct{}

func (noTokens) IssueBootCredential(context.Context, *machine.Machine, string, netip.Addr) (string, error) {
	return "", errors.New("this server has no API to issue machine credentials")
}

// Run builds every enabled service from cfg, binds their sockets (so
// configuration and bind errors surface before anything serves), then runs
// them and d.Services under one Supervisor until ctx ends (SIGTERM in
// cmd/ingot) or a service stops the process (see Supervisor), and shuts
// all of them down gracefully. The listeners bound here (DHCP, TFTP, HTTP)
// are Critical: their sockets cannot safely be bound again.
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
	if d.PublicLimit == nil {
		d.PublicLimit = cfg.PublicLimiter()
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
	var services []Service
	addrs := Addrs{HTTP: httpLn.Addr(), ServerIP: serverIP}
	var apiLn net.Listener
	var apiCert *apiTLS
	if cfg.APIAddr != "" {
		if apiLn, err = net.Listen("tcp", cfg.APIAddr); err != nil {
			return fmt.Errorf("api: listening on %s: %w", cfg.APIAddr, err)
		}
		defer apiLn.Close()
		addrs.API, addrs.APIURL = apiLn.Addr(), cfg.APIURL
		if addrs.APIURL == "" {
			addrs.APIURL = defaultAPIURL(serverIP, apiLn.Addr())
		}
		if apiCert, err = newAPITLS(cfg, certHosts(cfg, serverIP, addrs.APIURL, apiLn.Addr())); err != nil {
			return err
		}
		addrs.CA = apiCert.fingerprint
		services = append(services, apiCert.reloadService(d.Reload, d.Logger.With("service", "tls")))
	} else {
		d.Logger.Warn("the API shares the plain-HTTP boot listener (--api-addr ''): operator and machine tokens travel in clear")
	}

	dsvc, err := newDHCP(cfg, d, serverIP, publicURL)
	if err != nil {
		return err
	}
	if dsvc != nil {
		services = append(services, dsvc)
	}
	if rsvc := newRA(cfg, d); rsvc != nil {
		services = append(services, rsvc)
	}
	if cfg.TFTP {
		t, err := tftp.New(tftp.Config{
			Addr:         netip.AddrPortFrom(serverIP, uint16(cfg.TFTPPort)).String(),
			Files:        bootDirs,
			MaxTransfers: cfg.TFTPMaxTransfers,
			MaxPerClient: cfg.TFTPMaxPerClient,
			FirstACKWait: cfg.TFTPFirstACKWait,
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
		services = append(services, Critical(ServiceFunc("tftp", t.Serve)))
	}
	hb, err := httpboot.New(httpboot.Config{
		ServerURL:     publicURL,
		Limit:         d.PublicLimit,
		Machines:      d.Store,
		Recipes:       d.Recipes,
		Tokens:        d.Tokens,
		Artifacts:     d.Artifacts,
		BootFiles:     bootDirs,
		Unknown:       cfg.Unknown,
		Discovery:     httpboot.Discovery{Kernel: cfg.DiscoveryKernel, Initrd: cfg.DiscoveryInitrd, Cmdline: cfg.DiscoveryCmdline},
		Logger:        d.Logger.With("service", "http"),
		Registerer:    d.Registry,
		Gatherer:      gatherer(apiLn == nil, d.Registry),
		APIURL:        addrs.APIURL,
		CAFingerprint: addrs.CA,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	hb.Register(mux)
	if d.Media != nil {
		// The BMC fetches CDs where firmware fetches its files.
		d.Media.bind(publicURL, addrs.APIURL, addrs.CA)
		d.Media.Register(mux, d.PublicLimit)
	}
	apiMux := mux
	if apiLn != nil {
		// The API, its CA and /metrics only on the TLS listener; the boot
		// listener keeps what firmware fetches.
		apiMux = http.NewServeMux()
		apiMux.Handle("GET /metrics", promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{}))
		apiMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		apiMux.HandleFunc("GET /api/v1/ca.pem", apiCert.serveCA)
		tlsLn := tls.NewListener(apiLn, apiCert.holder.ServerConfig())
		services = append(services, Critical(ServiceFunc("api", httpService(tlsLn, apiMux, cfg, d.Logger))))
	}
	for _, m := range d.Mount {
		m(apiMux)
	}
	services = append(services, Critical(ServiceFunc("http", httpService(httpLn, mux, cfg, d.Logger))))
	services = append(services, d.Services...)

	d.Logger.Info("ingot serving", "interface", cfg.Interface, "server_ip", serverIP, "http", httpLn.Addr().String(),
		"public_url", publicURL, "dhcp", cfg.DHCP, "tftp", cfg.TFTP)
	if apiLn != nil {
		d.Logger.Info("api serving over TLS: give operators ca.pem (--ca) and check its fingerprint", "api", apiLn.Addr().String(),
			"api_url", addrs.APIURL, "ca_fingerprint", addrs.CA, "ca_pem", caPath(cfg))
	}
	if d.Ready != nil {
		d.Ready(addrs)
	}
	err = Supervisor{Services: services, Logger: d.Logger}.Run(ctx)
	d.Logger.Info("ingot stopped", "err", err)
	return err
}

// gatherer is what the boot listener's /metrics exports: everything when
// it is the only listener, nothing when the API listener has /metrics.
func gatherer(onBoot bool, r *prometheus.Registry) prometheus.Gatherer {
	if onBoot {
		return r
	}
	return nil
}

// caPath is the PEM operators give the CLI (--ca).
func caPath(cfg Config) string {
	if cfg.TLSCert != "" {
		return cfg.TLSCert
	}
	return filepath.Join(cfg.Data, "tls", tlsca.CAFile)
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
