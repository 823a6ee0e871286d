package serve

import (
	"cmp"
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

// Deps are the things Serve serves from: Run builds them from the
// configuration; tests give their own.
type Deps struct {
	// Store keeps DHCP's leases, answers the boot services' lookups by
	// MAC, and its backend's numbers are on /metrics.
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
	// /vmedia/, /firmware/, /metrics, /healthz.
	Mount []func(*http.ServeMux)
	// Media builds the agent's boot CDs (the engine's Media, made before
	// the engine); Run tells it the server's URLs and serves its CDs on
	// the boot listener at /vmedia/. nil: no virtual media.
	Media *VirtualMedia
	// Firmware serves firmware packages to BMCs on the boot listener at
	// /firmware/ (bound to --firmware-url, else the public URL). nil: none.
	Firmware *FirmwarePackages
	// Ready, if set, is called once every socket is bound (tests, systemd notify).
	Ready func(Addrs)
	// Reload delivers SIGHUP: the API certificate is loaded again.
	Reload <-chan os.Signal
	// PublicLimit bounds /ipxe per client address (share it with the API's
	// credential-less routes); nil: one from cfg.PublicRate.
	PublicLimit *ratelimit.Limiter
	// DHCPActive says whether this instance answers DHCP now (several
	// instances on one etcd store answer a segment one at a time,
	// pkg/scaleout); nil: always.
	DHCPActive func() bool
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

// Serve binds every enabled listener from cfg (so configuration and bind
// errors surface before anything serves), then runs them and d.Services
// under one Supervisor until ctx ends (SIGTERM in cmd/ingot) or a service
// stops the process (see Supervisor), and shuts all of them down
// gracefully. The listeners bound here (DHCP, TFTP, HTTP) are Critical:
// their sockets cannot safely be bound again. Run builds d from cfg; tests
// give their own.
func Serve(ctx context.Context, cfg Config, d Deps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	d, err := d.withDefaults(cfg)
	if err != nil {
		return err
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
	b := &binding{cfg: cfg, d: d, serverIP: serverIP, httpLn: httpLn, addrs: Addrs{HTTP: httpLn.Addr(), ServerIP: serverIP}}
	b.publicURL = cfg.PublicURL
	if b.publicURL == "" {
		b.publicURL = defaultPublicURL(serverIP, httpLn.Addr())
	}
	defer b.close()
	for _, step := range []func() error{b.bootFiles, b.api, b.dhcp, b.tftp, b.http} {
		if err := step(); err != nil {
			return err
		}
	}
	b.logServing()
	if d.Ready != nil {
		d.Ready(b.addrs)
	}
	err = Supervisor{Services: append(b.services, d.Services...), Logger: d.Logger}.Run(ctx)
	d.Logger.Info("ingot stopped", "err", err)
	return err
}

// withDefaults fills in what a caller of Serve left out.
func (d Deps) withDefaults(cfg Config) (Deps, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
		d.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if d.Store != nil {
		if err := d.Registry.Register(storeCollector{d.Store}); err != nil {
			return d, fmt.Errorf("registering the store metrics: %w", err)
		}
	}
	if d.Tokens == nil {
		d.Tokens = noTokens{}
	}
	if d.PublicLimit == nil {
		d.PublicLimit = cfg.PublicLimiter()
	}
	return d, nil
}

// binding is what Serve binds, step by step: listeners, and the services
// that serve them.
type binding struct {
	cfg       Config
	d         Deps
	serverIP  netip.Addr
	publicURL string
	httpLn    net.Listener
	apiLn     net.Listener // nil with --api-addr ''
	apiCert   *apiTLS
	bootDirs  *bootfiles.Dirs
	addrs     Addrs
	services  []Service
}

func (b *binding) close() {
	if b.apiLn != nil {
		b.apiLn.Close()
	}
}

// bootFiles opens the folders of files firmware fetches (TFTP, /boot/).
func (b *binding) bootFiles() error {
	dirs, err := bootfiles.New([]string{b.cfg.BootDir, b.cfg.IPXEDir}, b.cfg.BootLinkTargets)
	switch {
	case err != nil && b.cfg.TFTP:
		return err
	case err != nil:
		b.d.Logger.Warn("no boot files directory: /boot/ is not served", "err", err)
	default:
		b.bootDirs = dirs
		b.pinFirstStages()
	}
	return nil
}

// pinFirstStages makes the boot folders refuse a first stage whose bytes
// are not its pin, and names each such file now: the rest is served, and
// the operator learns at start, not when a machine fails to boot.
func (b *binding) pinFirstStages() {
	if err := b.bootDirs.Pin(b.cfg.Pins()); err != nil {
		b.d.Logger.Error("first stages whose bytes are not their pins are refused until re-pinned "+
			"(--first-stage-pin NAME=SHA256 for the file you mean to serve)", "err", err)
	}
	if missing := b.bootDirs.Missing(); len(missing) > 0 {
		b.d.Logger.Debug("pinned first stages not in the boot folders", "files", missing)
	}
}

// api binds the API's TLS listener and loads (or makes) its certificate.
func (b *binding) api() error {
	if b.cfg.APIAddr == "" {
		b.d.Logger.Warn("the API shares the plain-HTTP boot listener (--api-addr ''): operator and machine tokens travel in clear; " +
			"no dashboard is served (its session cookie needs TLS)")
		return nil
	}
	ln, err := net.Listen("tcp", b.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("api: listening on %s: %w", b.cfg.APIAddr, err)
	}
	b.apiLn = ln
	b.addrs.API, b.addrs.APIURL = ln.Addr(), b.cfg.APIURL
	if b.addrs.APIURL == "" {
		b.addrs.APIURL = defaultAPIURL(b.serverIP, ln.Addr())
	}
	if b.apiCert, err = newAPITLS(b.cfg, certHosts(b.cfg, b.serverIP, b.addrs.APIURL, ln.Addr())); err != nil {
		return err
	}
	b.addrs.CA = b.apiCert.fingerprint
	b.services = append(b.services, b.apiCert.reloadService(b.d.Reload, b.d.Logger.With("service", "tls")))
	return nil
}

// dhcp binds DHCP and router advertisements, where enabled.
func (b *binding) dhcp() error {
	dsvc, err := newDHCP(b.cfg, b.d, b.serverIP, b.publicURL)
	if err != nil {
		return err
	}
	if dsvc != nil {
		b.services = append(b.services, dsvc)
	}
	if rsvc := newRA(b.cfg, b.d); rsvc != nil {
		b.services = append(b.services, rsvc)
	}
	return nil
}

// tftp binds the TFTP server, where enabled.
func (b *binding) tftp() error {
	if !b.cfg.TFTP {
		return nil
	}
	t, err := tftp.New(tftp.Config{
		Addr:         netip.AddrPortFrom(b.serverIP, uint16(b.cfg.TFTPPort)).String(),
		Files:        b.bootDirs,
		MaxTransfers: b.cfg.TFTPMaxTransfers,
		MaxPerClient: b.cfg.TFTPMaxPerClient,
		FirstACKWait: b.cfg.TFTPFirstACKWait,
		MaxBlockSize: b.cfg.TFTPBlockSize,
		Logger:       b.d.Logger.With("service", "tftp"),
		Registerer:   b.d.Registry,
	})
	if err != nil {
		return err
	}
	if b.addrs.TFTP, err = t.Listen(); err != nil {
		return err
	}
	b.services = append(b.services, Critical(ServiceFunc("tftp", t.Serve)))
	return nil
}

// http builds the boot listener's routes and, on its own TLS listener,
// the API's, /metrics and the CA.
func (b *binding) http() error {
	hb, err := httpboot.New(httpboot.Config{
		ServerURL:       b.publicURL,
		Limit:           b.d.PublicLimit,
		Machines:        b.d.Store,
		Recipes:         b.d.Recipes,
		Tokens:          b.d.Tokens,
		Artifacts:       b.d.Artifacts,
		BootFiles:       b.bootDirs,
		StubSHA256:      stubPin(b.cfg.EFIStubSHA256),
		StubARM64SHA256: stubPin(b.cfg.EFIStubARM64SHA256),
		Unknown:         b.cfg.Unknown,
		Discovery:       httpboot.Discovery{Kernel: b.cfg.DiscoveryKernel, Initrd: b.cfg.DiscoveryInitrd, Cmdline: b.cfg.DiscoveryCmdline},
		Logger:          b.d.Logger.With("service", "http"),
		Registerer:      b.d.Registry,
		Gatherer:        gatherer(b.apiLn == nil, b.d.Registry),
		APIURL:          b.addrs.APIURL,
		CAFingerprint:   b.addrs.CA,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	hb.Register(mux)
	if b.d.Media != nil {
		// The BMC fetches CDs where firmware fetches its files.
		b.d.Media.bind(b.publicURL, b.addrs.APIURL, b.addrs.CA)
		b.d.Media.Register(mux, b.d.PublicLimit)
	}
	if b.d.Firmware != nil {
		b.d.Firmware.Bind(cmp.Or(b.cfg.FirmwareURL, b.publicURL))
		b.d.Firmware.Register(mux, b.d.PublicLimit)
	}
	apiMux := mux
	if b.apiLn != nil {
		// The API, its CA and /metrics only on the TLS listener; the boot
		// listener keeps what firmware fetches.
		apiMux = http.NewServeMux()
		apiMux.Handle("GET /metrics", promhttp.HandlerFor(b.d.Registry, promhttp.HandlerOpts{}))
		apiMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		apiMux.HandleFunc("GET /api/v1/ca.pem", b.apiCert.serveCA)
		tlsLn := tls.NewListener(b.apiLn, b.apiCert.holder.ServerConfig())
		b.services = append(b.services, Critical(ServiceFunc("api", httpService(tlsLn, apiMux, b.cfg, b.d.Logger))))
	}
	for _, m := range b.d.Mount {
		m(apiMux)
	}
	b.services = append(b.services, Critical(ServiceFunc("http", httpService(b.httpLn, mux, b.cfg, b.d.Logger))))
	return nil
}

func (b *binding) logServing() {
	b.d.Logger.Info("ingot serving", "interface", b.cfg.Interface, "server_ip", b.serverIP, "http", b.httpLn.Addr().String(),
		"public_url", b.publicURL, "dhcp", b.cfg.DHCP, "tftp", b.cfg.TFTP)
	if b.apiLn != nil {
		b.d.Logger.Info("api serving over TLS: give operators ca.pem (--ca) and check its fingerprint", "api", b.apiLn.Addr().String(),
			"api_url", b.addrs.APIURL, "ca_fingerprint", b.addrs.CA, "ca_pem", caPath(b.cfg), "dashboard", b.addrs.APIURL+"/ui/")
	}
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
