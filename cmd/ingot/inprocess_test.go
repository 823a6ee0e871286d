package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/ingot-dev/ingot/pkg/serve"
)

// inProcess builds `ingot serve`'s parts as serve.Run does (serve.Build)
// over the data folder data, with the recipes in dir, BMC credentials
// under credDir and first-use binding (every simulated machine calls from
// 127.0.0.1), no DHCP and no telemetry; it runs the engine until ctx ends
// and serves the API and the firmware packages on a test server, whose
// URL it returns. opts change the configuration first.
func inProcess(ctx context.Context, t *testing.T, data, dir, credDir string, opts ...func(*serve.Config)) (*serve.Parts, string) {
	t.Helper()
	cfg := serve.Defaults()
	cfg.Data, cfg.DB, cfg.Recipes = data, filepath.Join(data, "ingot.db"), dir
	cfg.SecretKeyFile = filepath.Join(data, "secrets.key")
	cfg.DHCP, cfg.AgentBinding, cfg.BMCCredentialsDir = "off", "first-use", credDir
	cfg.TelemetryInterval, cfg.InventoryRefresh = 0, 0
	for _, o := range opts {
		o(&cfg)
	}
	p, err := serve.Build(ctx, cfg, serve.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	go p.Engine.Run(ctx)
	// The API, and the firmware packages BMCs fetch (the boot listener's
	// /firmware/ in serve), on one test server.
	mux := http.NewServeMux()
	p.API.Register(mux)
	p.Firmware.Register(mux, nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.Firmware.Bind(srv.URL)
	return p, srv.URL
}
