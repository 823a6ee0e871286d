package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/ingot-dev/ingot/pkg/serve"
)

// inProcess builds `ingot serve`'s parts as serve.Run does (serve.Build)
// over the data folder data, with the recipes in dir, BMC credentials
// under credDir and first-use binding (every simulated machine calls from
// 127.0.0.1), no DHCP and no telemetry; it runs the engine until ctx ends
// and serves the API on a test server, whose URL it returns.
func inProcess(ctx context.Context, t *testing.T, data, dir, credDir string) (*serve.Parts, string) {
	t.Helper()
	cfg := serve.Defaults()
	cfg.Data, cfg.DB, cfg.Recipes = data, filepath.Join(data, "ingot.db"), dir
	cfg.SecretKeyFile = filepath.Join(data, "secrets.key")
	cfg.DHCP, cfg.AgentBinding, cfg.BMCCredentialsDir = "off", "first-use", credDir
	cfg.TelemetryInterval, cfg.InventoryRefresh = 0, 0
	p, err := serve.Build(ctx, cfg, serve.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	go p.Engine.Run(ctx)
	srv := httptest.NewServer(p.API.Handler())
	t.Cleanup(srv.Close)
	return p, srv.URL
}
