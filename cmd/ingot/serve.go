package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/catalog"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/secret"
	"github.com/ingot-dev/ingot/pkg/serve"
	"github.com/ingot-dev/ingot/pkg/store"
)

// serveGCPercent is the GC target `ingot serve` runs with unless GOGC is set.
const serveGCPercent = 400

// runServe runs DHCP, TFTP and HTTP boot (and the API, mounted through
// serve.Deps.Mount, and the engine, one of serve's supervised services)
// until SIGTERM or SIGINT. Settings: see pkg/serve.
func runServe(ctx context.Context, e *env, args []string) error {
	cfg, err := serve.Load(args, e.getenv, e.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "ingot serve:", err)
		return errUsage
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log := e.logger(cfg.LogLevel)
	if e.getenv("GOGC") == "" {
		// A DHCP storm allocates a little per packet in a small heap; the
		// default GOGC=100 spent ~12% of the server's CPU in GC (measured with
		// the DHCP benchmark). A few MiB more heap is the cheaper side.
		debug.SetGCPercent(serveGCPercent)
	}
	// SIGHUP reloads the recipes and the API certificate.
	hup, tlsHup := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	signal.Notify(tlsHup, syscall.SIGHUP)
	defer signal.Stop(hup)
	defer signal.Stop(tlsHup)
	cat, err := catalog.New(catalog.Config{Dir: cfg.Recipes, Reload: hup, Logger: log.With("service", "recipes")})
	if err != nil {
		return err
	}
	recipes, names := cat.Get, cat.Names
	st, err := store.OpenURL(ctx, cfg.DB, store.Options{Timeout: 5 * time.Second, Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := bootstrapToken(ctx, st, cfg.Data, log); err != nil {
		return err
	}
	arts, err := artifact.Open(filepath.Join(cfg.Data, "artifacts"))
	if err != nil {
		return err
	}
	dhcpInfo, err := dhcpInfo(cfg)
	if err != nil {
		return err
	}
	publicLimit := cfg.PublicLimiter() // one budget per address for /ipxe and the by-MAC API routes
	keys, err := secret.Load(cfg.SecretKeyFile)
	if err != nil {
		return err
	}
	media, err := serve.NewVirtualMedia(serve.MediaConfig{Dir: filepath.Join(cfg.Data, "vmedia"), Artifacts: arts, Jobs: st,
		Logger: log.With("service", "vmedia")})
	if err != nil {
		return err
	}
	prov, err := newProvisioning(provisioningConfig{Store: st, Artifacts: arts, Recipes: recipes, Names: names, PublicURL: cfg.PublicURL, Media: media,
		Binding: cfg.Binding(), Iface: cfg.Interface, DHCP: dhcpInfo,
		Creds: credential.Policy{Dir: cfg.BMCCredentialsDir, EnvPrefix: cfg.BMCCredentialEnvPrefix, Getenv: e.getenv},
		Keys:  keys, PublicLimit: publicLimit, Log: log, DrillMaxAge: cfg.DrillMaxAge, WarmKeyFile: filepath.Join(cfg.Data, "warm.key"),
		Telemetry: telemetryConfig{Interval: cfg.TelemetryInterval, Webhook: cfg.AlertWebhook, Alertmanager: cfg.AlertmanagerURL, RacksDir: cfg.Recipes}})
	if err != nil {
		return err
	}
	defer prov.bmcs.Close() // logs every shared BMC session out
	if n, err := prov.fleet.SweepTokens(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Info("expired operator tokens removed at start", "count", n)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	services := []serve.Service{serve.ServiceFunc("engine", prov.engine.Run), serve.ServiceFunc("recipes", cat.Run),
		serve.ServiceFunc("bmc-rotation", func(ctx context.Context) error { return prov.fleet.RunRotation(ctx, cfg.BMCRotateEvery) }),
		serve.ServiceFunc("inventory-refresh", func(ctx context.Context) error { return prov.fleet.RunRefresh(ctx, cfg.InventoryRefresh) })}
	if prov.telemetry != nil {
		reg.MustRegister(prov.telemetry.Collector())
		services = append(services, serve.ServiceFunc("telemetry", prov.telemetry.Run))
	}
	return serve.Run(ctx, cfg, serve.Deps{
		Registry:    reg,
		Store:       st,
		Discover:    prov.fleet,
		Artifacts:   arts,
		Recipes:     recipes,
		Tokens:      prov.api,
		Logger:      log,
		Mount:       []func(*http.ServeMux){prov.mount},
		Reload:      tlsHup,
		PublicLimit: publicLimit,
		Services:    services,
		Media:       media,
	})
}

// dhcpInfo tells the engine what serve's DHCP answers for (recipes'
// network.pool reservations).
func dhcpInfo(cfg serve.Config) (engine.DHCPInfo, error) {
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
