package serve

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// httpOnly is a configuration with DHCP and TFTP off, HTTP on a free
// loopback port, and a store and artifacts in a temporary folder.
func httpOnly(t *testing.T) (Config, Deps) {
	t.Helper()
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "ingot.db"), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	arts, err := artifact.Open(filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults()
	cfg.Data, cfg.DHCP, cfg.TFTP, cfg.HTTPAddr = dir, "off", false, "127.0.0.1:0"
	cfg.APIAddr = "" // the API on the boot listener; TestRunAPIOverTLS covers its own
	cfg.BootDir, cfg.IPXEDir = filepath.Join(dir, "boot"), filepath.Join(dir, "ipxe")
	return cfg, Deps{Store: st, Artifacts: arts,
		Recipes: func(n string) (*recipe.Recipe, error) { return nil, store.ErrNotFound }}
}

// TestRunHTTPOnly runs the whole wiring with DHCP and TFTP off on loopback:
// the boot routes and a mounted extra route answer, and cancelling the
// context stops Run cleanly.
func TestRunHTTPOnly(t *testing.T) {
	cfg, d := httpOnly(t)
	st := d.Store
	d.Mount = []func(*http.ServeMux){func(m *http.ServeMux) {
		m.HandleFunc("GET /api/v1/ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong") })
	}}
	addrs, stop := startRun(t, cfg, d)
	base := "http://" + addrs.HTTP.String()
	lease := store.Lease{MAC: "52:54:00:00:00:01", IP: netip.MustParseAddr("10.0.0.1"), State: "bound", Expires: time.Now().Add(time.Hour)}
	if err := st.PutLease(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/api/v1/ping": "pong", "/metrics": "go_goroutines",
		"/metrics#lease log": "\ningot_store_lease_log_mutations_total 1\n"} {
		path, _, _ = strings.Cut(path, "#")
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d %.80q, want %q", path, resp.StatusCode, b, want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// startRun runs Run until the returned stop is called (or the test ends)
// and returns the bound addresses; stop says how Run ended.
func startRun(t *testing.T, cfg Config, d Deps) (Addrs, func() error) {
	t.Helper()
	ready := make(chan Addrs, 1)
	d.Ready = func(a Addrs) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, d) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			done <- err
			if err != nil {
				return fmt.Errorf("Run after cancel: %w", err)
			}
			return nil
		case <-time.After(15 * time.Second):
			return errors.New("Run did not stop within 15s of cancel")
		}
	}
	t.Cleanup(func() { stop() })
	select {
	case a := <-ready:
		return a, stop
	case err := <-done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start within 10 s")
	}
	return Addrs{}, stop
}

// TestFirstStagePins: serve names a first stage whose bytes are not its
// pin at start and refuses it over /boot/, while a file at its pin is
// served; with the pin off the same file is served.
func TestFirstStagePins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pin     string // of ipxe.efi; "" the pin of its bytes
		want    int
		wantLog bool
	}{
		{"changed", strings.Repeat("0", 64), http.StatusNotFound, true},
		{"at its pin", "", http.StatusOK, false},
		{"off", "off", http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, d := httpOnly(t)
			body := []byte("an iPXE build of this site")
			if err := os.MkdirAll(cfg.BootDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cfg.BootDir, "ipxe.efi"), body, 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(body)
			cfg.FirstStagePins = map[string]string{"ipxe.efi": cmp.Or(tc.pin, hex.EncodeToString(sum[:]))}
			var log lockedBuf
			d.Logger = slog.New(slog.NewTextHandler(&log, nil))
			addrs, _ := startRun(t, cfg, d)
			resp, err := http.Get("http://" + addrs.HTTP.String() + "/boot/ipxe.efi")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET /boot/ipxe.efi: %d, want %d", resp.StatusCode, tc.want)
			}
			named := strings.Contains(log.String(), "first stages whose bytes are not their pins") && strings.Contains(log.String(), "ipxe.efi")
			if named != tc.wantLog {
				t.Errorf("start log names the changed file: %v, want %v\n%s", named, tc.wantLog, log.String())
			}
		})
	}
}
