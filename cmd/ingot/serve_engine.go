package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/image"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/secret"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/telemetry"
	"github.com/ingot-dev/ingot/pkg/warm"
)

// provisioning is the engine and its API, wired for `ingot serve`.
type provisioning struct {
	engine    *engine.Engine
	api       *apiserver.Server
	fleet     *fleet.Service
	telemetry *telemetry.Service // nil: BMCs are not polled
	// bmcs holds one session per BMC, shared by the engine, inspect, the
	// inventory refresh and telemetry (serve closes it last).
	bmcs *bmc.Pool
}

// provisioningConfig is what newProvisioning builds from.
type provisioningConfig struct {
	Store     store.Store
	Artifacts *artifact.Store
	Recipes   func(string) (*recipe.Recipe, error)
	Names     func() []string
	PublicURL string
	Binding   string
	Iface     string
	DHCP      engine.DHCPInfo
	Creds     credential.Policy
	Keys      *secret.Keyring
	// PublicLimit bounds the credential-less routes per address.
	PublicLimit *ratelimit.Limiter
	// DrillMaxAge is how old a passing restore drill may be (scale-ready).
	DrillMaxAge time.Duration
	// Telemetry polls BMCs when its Interval is set.
	Telemetry telemetryConfig
	// Media builds the agent's boot CDs (os.agent.boot: virtual-media).
	Media engine.Media
	// WarmKeyFile is the warm reimage signing key (made on first use);
	// "" no warm reimages.
	WarmKeyFile string
	Log         *slog.Logger
}

// newProvisioning builds the engine (BMCs through pkg/bmc, credentials from
// each machine's reference, drift from pkg/drift), the fleet, telemetry
// and the API on top of them.
func newProvisioning(c provisioningConfig) (*provisioning, error) {
	st, arts, recipes, names, publicURL, binding, iface := c.Store, c.Artifacts, c.Recipes, c.Names, c.PublicURL, c.Binding, c.Iface
	dhcpInfo, creds, keys, publicLimit, log := c.DHCP, c.Creds, c.Keys, c.PublicLimit, c.Log
	var fl *fleet.Service // made below; the engine's dials resolve secret: references through it
	pool := bmc.NewPool(nil)
	dial := func(ctx context.Context, m *machine.Machine) (engine.BMC, error) {
		return pooledMachineBMC(ctx, pool, m, fl.Credentials(), log)
	}
	var artifacts engine.Artifacts
	size := func(string) (int64, bool) { return 0, false }
	if arts != nil {
		artifacts = arts
		size = func(sha string) (int64, bool) {
			ref, err := arts.Stat(sha)
			return ref.Size, err == nil
		}
	}
	var warmFn func(context.Context, *machine.Machine, string) error
	var warmPub string
	if c.WarmKeyFile != "" {
		key, err := warm.LoadOrCreateKey(c.WarmKeyFile)
		if err != nil {
			return nil, err
		}
		warmPub = warm.EncodePublic(key.Public().(ed25519.PublicKey))
		warmFn = func(ctx context.Context, m *machine.Machine, jobID string) error {
			addr, err := nodeAddress(ctx, st, m)
			if err != nil {
				return err
			}
			body, sig := warm.Sign(key, m.ID, jobID, time.Now())
			return warm.Trigger(ctx, net.JoinHostPort(addr, strconv.Itoa(warm.Port)), body, sig, 15*time.Second)
		}
	}
	e, err := engine.New(engine.Config{
		Store: st, DialBMC: dial, Warm: warmFn, BootURL: publicURL, Recipes: recipes, Artifacts: artifacts, Logger: log.With("service", "engine"), DHCP: dhcpInfo,
		Racks: racksIn(c.Telemetry.RacksDir, log), DrillMaxAge: c.DrillMaxAge, Media: c.Media,
		Drift: func(inv machine.Inventory, r *recipe.Recipe) []engine.Finding {
			var out []engine.Finding
			for _, f := range drift.Check(inv, r) {
				out = append(out, engineFinding(f))
			}
			return out
		},
		Reconcile: func(inBand, fromBMC machine.Inventory) []engine.Finding {
			var out []engine.Finding
			for _, f := range drift.ReconcileGPUs(inBand.GPUs, fromBMC.GPUs) {
				out = append(out, engineFinding(f))
			}
			return out
		},
	})
	if err != nil {
		return nil, err
	}
	auth, err := agentauth.New(agentauth.Config{Store: st, Binding: agentauth.Binding(binding),
		Neighbours: agentauth.ReadARP("/proc/net/arp", iface), Logger: log.With("service", "agentauth")})
	if err != nil {
		return nil, err
	}
	secrets, _ := st.(store.SecretStore)
	fl, err = fleet.New(fleet.Config{Store: st, Recipes: recipes, Logger: log.With("service", "fleet"), Credentials: creds,
		Secrets: secrets, Keys: keys,
		DialBMC: func(ctx context.Context, m *machine.Machine) (fleet.BMCReader, error) {
			return pooledMachineBMC(ctx, pool, m, fl.Credentials(), log)
		},
		// A rotation logs in on its own session, with the password it
		// names; when it is done the pooled session (logged in with the
		// old password) is dropped, so the next use logs in afresh instead
		// of failing a renewal with a password the BMC no longer takes.
		DialBMCAs: func(ctx context.Context, m *machine.Machine, user, pass string) (fleet.BMCRotator, error) {
			c, err := bmc.Dial(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass,
				Insecure: m.BMC.Insecure, Logger: log.With("bmc", m.BMC.Endpoint)})
			if err != nil {
				return nil, err
			}
			return rotatingBMC{Client: c, forget: func() error { return pool.Forget(m.BMC.Endpoint, user) }}, nil
		}})
	if err != nil {
		return nil, err
	}
	var tel *telemetry.Service
	if c.Telemetry.Interval > 0 {
		if tel, err = newTelemetry(c.Telemetry, st, fl, recipes, pool, log); err != nil {
			return nil, err
		}
		e.SetWaveCheck(waveCheck(tel))
	}
	api, err := apiserver.New(apiserver.Config{Telemetry: tel, Store: st, Engine: e, Fleet: fl, Recipes: recipes, RecipeNames: names,
		BaseURL: publicURL, Logger: log.With("service", "api"), ArtifactSize: size, Auth: auth, Version: version, PublicLimit: publicLimit,
		Images:      func() ([]wire.Image, error) { return listImages(arts) },
		DialBMCLogs: apiserver.BMCLogsDialer(fl.Credentials, log.With("service", "evidence")), WarmKey: warmPub})
	if err != nil {
		return nil, err
	}
	return &provisioning{engine: e, api: api, fleet: fl, telemetry: tel, bmcs: pool}, nil
}

// listImages lists the content store's images for the API.
func listImages(arts *artifact.Store) ([]wire.Image, error) {
	if arts == nil {
		return nil, nil
	}
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

// engineFinding carries a drift finding to the engine: its message with
// what was expected and found (the part and severity travel apart).
func engineFinding(f drift.Finding) engine.Finding {
	msg := f.Message
	if f.Expected != "" || f.Found != "" {
		msg += fmt.Sprintf(" (expected %s, found %s)", f.Expected, f.Found)
	}
	return engine.Finding{Severity: string(f.Severity), Part: f.Part, Message: msg, Check: f.Check}
}

// mount adds the API routes to serve's HTTP mux.
func (p *provisioning) mount(mux *http.ServeMux) { p.api.Register(mux) }

// pooledMachineBMC hands out the machine's shared BMC session (bmc.Pool),
// logging in with the credentials its reference names, where the server's
// policy allows. Its Close leaves the session to the pool.
func pooledMachineBMC(ctx context.Context, pool *bmc.Pool, m *machine.Machine, creds credential.Policy, log *slog.Logger) (engine.BMC, error) {
	if m.BMC.Endpoint == "" {
		return nil, fmt.Errorf("machine %s has no BMC endpoint", m.Name)
	}
	user, pass, err := creds.Resolve(m.BMC.CredentialRef)
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", m.Name, err)
	}
	c, err := pool.Get(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass,
		Insecure: m.BMC.Insecure, Logger: log.With("bmc", m.BMC.Endpoint)})
	if err != nil {
		return nil, err
	}
	return engineBMC{c: c, pooled: true}, nil
}

// rotatingBMC is a rotation's own session; closing it also drops the
// pooled one.
type rotatingBMC struct {
	*bmc.Client
	forget func() error
}

func (b rotatingBMC) Close() error { return errors.Join(b.Client.Close(), b.forget()) }

// engineBMC adapts *bmc.Client to engine.BMC. A pooled client is not
// closed by its user: the pool keeps its session for the next.
type engineBMC struct {
	c      *bmc.Client
	pooled bool
}

func (b engineBMC) PowerCycle(ctx context.Context) error { return b.c.PowerCycle(ctx) }
func (b engineBMC) SetBootOverride(ctx context.Context, target, uri string, once bool) error {
	return b.c.SetBootOverride(ctx, target, uri, once)
}
func (b engineBMC) ApplyBIOS(ctx context.Context, attrs map[string]any) error {
	_, err := b.c.ApplyBIOS(ctx, attrs)
	return err
}
func (b engineBMC) VerifyBIOS(ctx context.Context, want map[string]any) ([]string, error) {
	ms, err := b.c.VerifyBIOS(ctx, want)
	var out []string
	for _, m := range ms {
		out = append(out, m.String())
	}
	return out, err
}
func (b engineBMC) SetBootMode(ctx context.Context, mode string) error {
	return b.c.SetBootMode(ctx, mode)
}
func (b engineBMC) BootState(ctx context.Context) (engine.BootState, error) {
	st, err := b.c.GetBootState(ctx)
	return engine.BootState{Power: st.Power, Target: st.Target, Enabled: st.Enabled, Mode: st.Mode}, err
}
func (b engineBMC) Inventory(ctx context.Context) (machine.Inventory, error) {
	return b.c.Inventory(ctx)
}
func (b engineBMC) NodeWatts(ctx context.Context) (int, error) { return b.c.NodeWatts(ctx) }
func (b engineBMC) InsertMedia(ctx context.Context, image string) error {
	return b.c.InsertMedia(ctx, image)
}
func (b engineBMC) EjectMedia(ctx context.Context) error { return b.c.EjectMedia(ctx) }
func (b engineBMC) Close() error {
	if b.pooled {
		return nil
	}
	return b.c.Close()
}

// nodeAddress is where a machine's installed OS answers: its reserved
// address, else the address ingot's DHCP last leased its first MAC.
func nodeAddress(ctx context.Context, st store.Store, m *machine.Machine) (string, error) {
	if m.IPv4 != "" {
		return m.IPv4, nil
	}
	for _, mac := range m.MACs {
		if l, err := st.LeaseByMAC(ctx, mac); err == nil && l.IP.IsValid() {
			return l.IP.String(), nil
		}
	}
	return "", fmt.Errorf("machine %s has no reserved address and no lease from ingot's DHCP: its warm reimage service cannot be reached", m.Name)
}
