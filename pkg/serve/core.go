package serve

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/catalog"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/image"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/scaleout"
	"github.com/ingot-dev/ingot/pkg/secret"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/backends"
	"github.com/ingot-dev/ingot/pkg/telemetry"
	"github.com/ingot-dev/ingot/pkg/warm"
	"github.com/ingot-dev/ingot/pkg/web"
)

// Options are what Run needs beyond the configuration: what the process
// gives (logger, version, environment, signals).
type Options struct {
	Logger  *slog.Logger
	Version string
	// Getenv resolves env: BMC credential references (os.Getenv when nil).
	Getenv func(string) string
	// Reload delivers SIGHUP: the recipes and the API certificate are
	// loaded again.
	Reload <-chan os.Signal
	// Ready, if set, is called once every socket is bound.
	Ready func(Addrs)
}

// Parts are every part of ingot serve that Build makes from the
// configuration, in the order they depend on each other. Run serves them;
// a program that drives ingot in-process (a test with simulated machines)
// uses them directly.
type Parts struct {
	Store  store.Store
	Fleet  *fleet.Service
	Auth   *agentauth.Auth
	Engine *engine.Engine
	API    *apiserver.Server
	// Web is the dashboard (pkg/web), mounted on the API's TLS listener;
	// with --api-addr '' it is built but not served.
	Web *web.Server
	// BMCs holds one session per BMC, shared by every part.
	BMCs *bmc.Pool
	// Node is this instance among those sharing the store (pkg/scaleout).
	Node *scaleout.Node
	seg  *scaleout.Segment // scaleout.go

	cfg     Config
	o       Options
	log     *slog.Logger
	recipes *catalog.Catalog
	arts    *artifact.Store
	keys    *secret.Keyring
	bmcs    *bmcDialers
	media   *VirtualMedia
	// Firmware serves firmware packages to BMCs at per-job URLs (Run
	// binds it to the boot listener).
	Firmware *FirmwarePackages
	tel      *telemetry.Service // nil: BMCs are not polled
	limiter  *ratelimit.Limiter
	warmKey  ed25519.PrivateKey
	// SIGHUP reaches both: the recipes and the API certificate reload.
	recipeReload, tlsReload chan os.Signal
}

// Build makes every part from cfg, in order, without binding a listener or
// starting a service (Run does both); on an error, what was made is
// closed. Close releases the parts.
func Build(ctx context.Context, cfg Config, o Options) (*Parts, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	pool := bmc.NewPool(nil)
	c := &Parts{cfg: cfg, o: o, log: o.Logger, BMCs: pool, bmcs: &bmcDialers{pool: pool, log: o.Logger},
		recipeReload: make(chan os.Signal, 1), tlsReload: make(chan os.Signal, 1)}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"recipes", c.buildRecipes}, {"store", c.openStore}, {"scale-out", c.joinGroup}, {"content store", c.openArtifacts},
		{"secret keys", c.loadKeys}, {"warm reimage key", c.loadWarmKey}, {"fleet", c.buildFleet}, {"virtual media", c.buildMedia},
		{"firmware packages", c.buildFirmware},
		{"engine", c.buildEngine}, {"telemetry", c.buildTelemetry}, {"api", c.buildAPI}, {"dashboard", c.buildWeb},
	}
	for _, s := range steps {
		if err := s.fn(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("serve: %s: %w", s.name, err)
		}
	}
	return c, nil
}

// Close releases what Build made: every shared BMC session is logged out,
// then the store closed.
func (c *Parts) Close() {
	c.BMCs.Close()
	if c.Store != nil {
		if err := c.Store.Close(); err != nil {
			c.log.Error("closing the store", "err", err)
		}
	}
}

func (c *Parts) buildRecipes(context.Context) (err error) {
	c.recipes, err = catalog.New(catalog.Config{Dir: c.cfg.Recipes, Reload: c.recipeReload, Logger: c.log.With("service", "recipes")})
	return err
}

// storeBatchDelay is how long a write waits for others to share its
// commit: API clients answered in about a millisecond come back within
// it, and a lone writer loses little (BenchmarkAPIFleetScale: 16 clients
// enrol 1,150/s at 2 ms, 905/s at bbolt's default 10 ms).
const storeBatchDelay = 2 * time.Millisecond

func (c *Parts) openStore(ctx context.Context) error {
	st, err := backends.Open(ctx, c.cfg.DB, store.Options{Timeout: 5 * time.Second, Logger: c.log, BatchDelay: storeBatchDelay})
	if err != nil {
		return err
	}
	c.Store = st
	return bootstrapToken(ctx, st, c.cfg.Data, c.log)
}

// joinGroup makes this instance a member of those sharing the store (a
// group of one on bbolt).
func (c *Parts) joinGroup(ctx context.Context) (err error) {
	compact := c.cfg.StoreCompactEvery
	if compact == 0 {
		compact = -1 // never
	}
	// The etcd quota alarm (the maintenance leader's) and a difference
	// between the instances' recipe folders (new jobs would start from
	// different recipes depending on which instance takes them).
	quota := c.serviceAlert(telemetry.Alert{Rule: "etcd-quota", Name: "etcd store", Severity: "critical",
		Action: "the leader compacts and defragments on its schedule; if the alert stays, raise etcd's --quota-backend-bytes " +
			"(8 GiB at most) and quota= in the store URL, or find what grows (README: The etcd store, what the store holds)"})
	recipes := c.serviceAlert(telemetry.Alert{Rule: "recipes-differ", Name: "recipes", Severity: "warning",
		Action: "give every instance the same recipes folder (deploy it to all of them from the repository); " +
			"a job keeps the recipe pinned when it started, so only new jobs differ"})
	c.Node, err = scaleout.Join(ctx, c.Store, scaleout.Config{Name: c.cfg.Instance, TTL: c.cfg.InstanceTTL,
		Logger: c.log.With("service", "scale-out"), Maintenance: scaleout.Maintenance{CompactEvery: compact, Alert: quota},
		Recipes: c.recipes.Digests, RecipesDiffer: recipes})
	return err
}

// serviceAlert is a scale-out callback that fires or clears the service
// alert a (ingot alerts, the dashboard, the notifiers) with the summary it
// is given. It runs only once Build is done (scale-out's loops are a
// service), so c.tel is settled; without telemetry the log line scale-out
// writes is the record.
func (c *Parts) serviceAlert(a telemetry.Alert) func(ctx context.Context, firing bool, summary string) {
	return func(ctx context.Context, firing bool, summary string) {
		if c.tel == nil {
			return
		}
		a := a
		a.Summary = summary
		c.tel.SetServiceAlert(ctx, a, firing)
	}
}

func (c *Parts) openArtifacts(context.Context) (err error) {
	c.arts, err = artifact.Open(filepath.Join(c.cfg.Data, "artifacts"))
	return err
}

func (c *Parts) loadKeys(context.Context) (err error) {
	c.keys, err = secret.Load(c.cfg.SecretKeyFile)
	return err
}

// loadWarmKey loads the key warm reimage requests are signed with
// (DATA/warm.key, made on first use).
func (c *Parts) loadWarmKey(context.Context) (err error) {
	c.warmKey, err = warm.LoadOrCreateKey(filepath.Join(c.cfg.Data, "warm.key"))
	return err
}

func (c *Parts) buildFleet(ctx context.Context) error {
	getenv := c.o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	fl, err := fleet.New(fleet.Config{Store: c.Store, Recipes: c.recipes.Get, Logger: c.log.With("service", "fleet"), Keys: c.keys,
		TokenMaxTTL: c.cfg.TokenMaxTTL,
		Credentials: credential.Policy{Dir: c.cfg.BMCCredentialsDir, EnvPrefix: c.cfg.BMCCredentialEnvPrefix, Getenv: getenv},
		DialBMC:     c.bmcs.inspect, DialBMCAs: c.bmcs.rotate, Mine: c.mine()})
	if err != nil {
		return err
	}
	c.Fleet, c.bmcs.creds = fl, fl.Credentials
	if n, err := fl.SweepTokens(ctx); err != nil {
		return err
	} else if n > 0 {
		c.log.Info("expired operator tokens removed at start", "count", n)
	}
	c.Auth, err = agentauth.New(agentauth.Config{Store: c.Store, Binding: agentauth.Binding(c.cfg.Binding()), Record: fl.Record,
		Neighbours: agentauth.ReadARP("/proc/net/arp", c.cfg.Interface), Logger: c.log.With("service", "agentauth")})
	return err
}

func (c *Parts) buildMedia(context.Context) (err error) {
	c.media, err = NewVirtualMedia(MediaConfig{Dir: filepath.Join(c.cfg.Data, "vmedia"), Artifacts: c.arts, Jobs: c.Store,
		Logger: c.log.With("service", "vmedia")})
	return err
}

func (c *Parts) buildFirmware(context.Context) (err error) {
	c.Firmware, err = NewFirmwarePackages(c.cfg.Data, c.arts, c.Store, c.log.With("service", "firmware"))
	return err
}

func (c *Parts) buildEngine(context.Context) error {
	info, err := dhcpInfo(c.cfg)
	if err != nil {
		return err
	}
	c.Engine, err = engine.New(engine.Config{
		Machines: c.Fleet, Jobs: c.Store, Leases: c.Store, Credentials: c.Auth, DialBMC: c.bmcs.engine, Warm: c.warm,
		BootURL: c.cfg.PublicURL, Recipes: c.recipes.Get, Artifacts: c.arts, Logger: c.log.With("service", "engine"), DHCP: info,
		Racks: racksIn(c.cfg.Recipes, c.log), DrillMaxAge: c.cfg.DrillMaxAge, Media: c.media, Owner: c.Node.Owner(),
		Firmware: engine.FirmwareConfig{Dial: c.bmcs.firmware, Images: c.Firmware.Images, Timeout: c.cfg.FirmwareTimeout, Poll: c.cfg.FirmwarePoll},
		Drift: func(inv machine.Inventory, r *recipe.Recipe) []engine.Finding {
			return engineFindings(drift.Check(inv, r))
		},
		Reconcile: func(inBand, fromBMC machine.Inventory) []engine.Finding {
			return engineFindings(drift.ReconcileGPUs(inBand.GPUs, fromBMC.GPUs))
		},
	})
	return err
}

// warm is the engine's warm reimage trigger: a request signed with the
// server's key to the installed OS's warm service.
func (c *Parts) warm(ctx context.Context, m *machine.Machine, jobID string) error {
	addr, err := nodeAddress(ctx, c.Store, m)
	if err != nil {
		return err
	}
	body, sig := warm.Sign(c.warmKey, m.ID, jobID, time.Now())
	return warm.Trigger(ctx, net.JoinHostPort(addr, strconv.Itoa(warm.Port)), body, sig, 15*time.Second)
}

func (c *Parts) buildTelemetry(context.Context) error {
	if c.cfg.TelemetryInterval <= 0 {
		return nil
	}
	tel, err := newTelemetry(c.cfg, c.Store, c.Fleet, c.recipes.Get, c.bmcs.pool, c.log, c.mine())
	if err != nil {
		return err
	}
	c.tel = tel
	c.Engine.SetWaveCheck(waveCheck(tel))
	return nil
}

func (c *Parts) buildAPI(context.Context) (err error) {
	size := func(sha string) (int64, bool) {
		ref, err := c.arts.Stat(sha)
		return ref.Size, err == nil
	}
	c.API, err = apiserver.New(apiserver.Config{Telemetry: c.tel, Engine: c.Engine, Fleet: c.Fleet, Auth: c.Auth,
		Recipes: c.recipes.Get, RecipeNames: c.recipes.Names, BaseURL: c.cfg.PublicURL, Logger: c.log.With("service", "api"),
		ArtifactSize: size, Version: c.o.Version, PublicLimit: c.publicLimit(),
		Images:      func() ([]wire.Image, error) { return listImages(c.arts) },
		DialBMCLogs: apiserver.BMCLogsDialer(c.Fleet.Credentials, c.log.With("service", "evidence")),
		WarmKey:     warm.EncodePublic(c.warmKey.Public().(ed25519.PublicKey))})
	return err
}

func (c *Parts) buildWeb(context.Context) (err error) {
	c.Web, err = web.New(web.Config{Fleet: c.Fleet, Engine: c.Engine, Telemetry: c.tel, Recipes: c.recipes.Get,
		RecipeNames: c.recipes.Names, Logger: c.log.With("service", "dashboard"), Version: c.o.Version})
	return err
}

// Telemetry is the BMC poller; nil when the server polls no BMCs.
func (c *Parts) Telemetry() *telemetry.Service { return c.tel }

// Serve binds the listeners and serves the parts until ctx ends (Run
// after Build; tests that built the parts serve them with it).
func (c *Parts) Serve(ctx context.Context) error {
	d, err := c.deps()
	if err != nil {
		return err
	}
	return Serve(ctx, c.cfg, d)
}

// publicLimit is the one budget per address of the routes anyone may call
// without a credential: /ipxe and the API's by-MAC routes share it.
func (c *Parts) publicLimit() *ratelimit.Limiter {
	if c.limiter == nil {
		c.limiter = c.cfg.PublicLimiter()
	}
	return c.limiter
}

// services are the long-running parts beside the listeners.
func (c *Parts) services() []Service {
	out := []Service{ServiceFunc("engine", c.Engine.Run), ServiceFunc("recipes", c.recipes.Run),
		ServiceFunc("bmc-rotation", func(ctx context.Context) error { return c.Fleet.RunRotation(ctx, c.cfg.BMCRotateEvery) }),
		ServiceFunc("inventory-refresh", func(ctx context.Context) error { return c.Fleet.RunRefresh(ctx, c.cfg.InventoryRefresh) }),
		ServiceFunc("event-summaries", c.Fleet.RunEvents),
		ServiceFunc("reload", c.fanOutReload), ServiceFunc("dashboard", c.Web.Run),
		ServiceFunc("scale-out", c.Node.Run), ServiceFunc("dhcp-segment", c.segment().Run)}
	if c.tel != nil {
		out = append(out, ServiceFunc("telemetry", c.tel.Run))
	}
	return out
}

// fanOutReload hands each SIGHUP to the recipes and the certificate.
func (c *Parts) fanOutReload(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case sig := <-c.o.Reload:
			for _, ch := range []chan os.Signal{c.recipeReload, c.tlsReload} {
				select {
				case ch <- sig:
				default: // a reload is already pending there
				}
			}
		}
	}
}

// deps is what the listeners serve from.
func (c *Parts) deps() (Deps, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c.tel != nil {
		if err := reg.Register(c.tel.Collector()); err != nil {
			return Deps{}, fmt.Errorf("registering the telemetry metrics: %w", err)
		}
	}
	mount := []func(*http.ServeMux){c.API.Register}
	if c.cfg.APIAddr != "" { // the dashboard's cookie is Secure: TLS only
		mount = append(mount, c.Web.Register)
	}
	return Deps{Registry: reg, Store: c.Store, Discover: c.Fleet, Artifacts: c.arts, Recipes: c.recipes.Get, Tokens: c.API,
		Logger: c.log, Mount: mount, Reload: c.tlsReload, PublicLimit: c.publicLimit(),
		Services: c.services(), Media: c.media, Firmware: c.Firmware, Ready: c.o.Ready, DHCPActive: c.segment().Active}, nil
}

// dhcpInfo tells the engine what serve's DHCP answers for (recipes'
// network.pool reservations).
func dhcpInfo(cfg Config) (engine.DHCPInfo, error) {
	info := engine.DHCPInfo{Mode: cfg.DHCP}
	if cfg.DHCP != "full" {
		return info, nil
	}
	for _, s := range cfg.Pools {
		p, err := dhcp.ParsePool(s)
		if err != nil {
			return info, err
		}
		info.Pools = append(info.Pools, engine.DHCPPool{Subnet: p.Subnet, Start: p.Start, End: p.End, Router: p.Router})
	}
	ip, err := cfg.ResolveServerIP()
	if err != nil {
		return info, err
	}
	info.ServerIP = ip
	return info, nil
}

// listImages lists the content store's images for the API.
func listImages(arts *artifact.Store) ([]wire.Image, error) {
	imgs, err := image.List(arts)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Image, 0, len(imgs))
	for _, im := range imgs {
		out = append(out, wire.Image{Name: im.Name, SHA256: im.SHA256, Size: im.Size})
	}
	return out, nil
}

// engineFindings carry drift findings to the engine: each message with
// what was expected and found (the part and severity travel apart).
func engineFindings(fs []drift.Finding) []engine.Finding {
	var out []engine.Finding
	for _, f := range fs {
		msg := f.Message
		if f.Expected != "" || f.Found != "" {
			msg += fmt.Sprintf(" (expected %s, found %s)", f.Expected, f.Found)
		}
		out = append(out, engine.Finding{Severity: string(f.Severity), Part: f.Part, Message: msg, Check: f.Check})
	}
	return out
}

// nodeAddress is where a machine's installed OS answers: its reserved
// address, else the address ingot's DHCP last leased its first MAC.
func nodeAddress(ctx context.Context, leases store.LeaseStore, m *machine.Machine) (string, error) {
	if m.IPv4 != "" {
		return m.IPv4, nil
	}
	for _, mac := range m.MACs {
		if l, err := leases.LeaseByMAC(ctx, mac); err == nil && l.IP.IsValid() {
			return l.IP.String(), nil
		}
	}
	return "", fmt.Errorf("machine %s has no reserved address and no lease from ingot's DHCP: its warm reimage service cannot be reached", m.Name)
}
