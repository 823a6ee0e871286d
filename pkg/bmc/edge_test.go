package bmc_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// These tests put a thin handler in front of a real virtual BMC to make it
// misbehave the way some real BMCs do (the edge is the only mock).

func newVBMC(t *testing.T, mockup string) *vbmc.BMC {
	t.Helper()
	b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, mockup), Username: testUser, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTLSVerifiedByDefault(t *testing.T) {
	b := newVBMC(t, "dmtf-public-rackmount1")
	tlsConf, pem, _, err := vbmc.SelfSigned([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		b.ServeHTTP(w, r)
	}))
	srv.TLS = tlsConf
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "bmc.pem")
	if err := os.WriteFile(caFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}

	// Unknown certificate: refused at once, not retried.
	cfg := testConfig(srv.URL)
	start := time.Now()
	_, err = bmc.Dial(ctxT(t), cfg)
	if !bmc.IsKind(err, bmc.KindUnreachable) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Dial with an unknown certificate: %v, want KindUnreachable about the certificate", err)
	}
	if time.Since(start) > 2*time.Second || requests.Load() != 0 {
		t.Errorf("certificate failure took %v and reached the handler %d times; want no retries", time.Since(start), requests.Load())
	}
	// Pinned CA, and the explicit lab opt-out: both work.
	for name, cfg := range map[string]bmc.Config{"ca file": withCA(cfg, caFile), "insecure": insecure(cfg)} {
		c, err := bmc.Dial(ctxT(t), cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		closeAndCheckSessions(t, c, b)
	}
}

func withCA(c bmc.Config, f string) bmc.Config { c.CAFile = f; return c }
func insecure(c bmc.Config) bmc.Config         { c.Insecure = true; return c }

func TestPowerOffForcedAfterGracefulTimeout(t *testing.T) {
	// A host OS that ignores the ACPI shutdown: the BMC accepts
	// GracefulShutdown and nothing happens.
	b := newVBMC(t, "dmtf-public-rackmount1")
	var ignored atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Actions/ComputerSystem.Reset") {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte("GracefulShutdown")) {
				ignored.Add(1)
				w.WriteHeader(http.StatusNoContent)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := testConfig(srv.URL)
	cfg.PowerOffTimeout = 300 * time.Millisecond
	c := dial(t, cfg)
	defer closeAndCheckSessions(t, c, b)
	if err := c.PowerOff(ctxT(t)); err != nil {
		t.Fatalf("PowerOff: %v", err)
	}
	if ignored.Load() != 1 || b.Power() != "Off" {
		t.Errorf("graceful requests %d, power %s; want one ignored graceful shutdown, then forced Off", ignored.Load(), b.Power())
	}
}

func TestRotatePasswordThatDoesNotWorkIsRestored(t *testing.T) {
	// A BMC that accepts the new password but then refuses logins with it
	// (seen on BMCs with password policies enforced only at login).
	const newPass = "rejected-at-login"
	b := newVBMC(t, "dmtf-public-rackmount1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Sessions") {
			body, _ := io.ReadAll(r.Body)
			var login struct{ Password string }
			_ = json.Unmarshal(body, &login)
			if login.Password == newPass {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if u, p, ok := r.BasicAuth(); ok && u == testUser && p == newPass {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := dial(t, testConfig(srv.URL))
	err := c.RotatePassword(ctxT(t), "", newPass)
	if err == nil || !strings.Contains(err.Error(), "old password was restored") {
		t.Fatalf("RotatePassword = %v, want an error saying the old password was restored", err)
	}
	closeAndCheckSessions(t, c, b)
	// The old password still logs in.
	c2 := dial(t, testConfig(srv.URL))
	closeAndCheckSessions(t, c2, b)
}

func TestEmptyAndErrorBodiesBecomeProblems(t *testing.T) {
	b := newVBMC(t, "dmtf-public-rackmount1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redfish/v1/Chassis/1U/Thermal":
			w.WriteHeader(http.StatusOK) // empty 200
			return
		case "/redfish/v1/Systems/437XR1138R2/Processors/CPU2":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.InternalError","message":"sensor bus timeout"}}`))
			return
		}
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := dial(t, testConfig(srv.URL))
	defer closeAndCheckSessions(t, c, b)
	inv, err := c.Inventory(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range inv.Problems {
		got[p.Part] = p.Detail
	}
	if !strings.Contains(got["Chassis/1U/Thermal"], "empty body") ||
		!strings.Contains(got["Systems/437XR1138R2/Processors/CPU2"], "sensor bus timeout") {
		t.Errorf("problems = %v, want the empty Thermal and the CPU2 error body", got)
	}
	if inv.Power.Watts != 344 || len(inv.CPUs) != 1 || len(inv.Thermal.Temperatures) != 0 {
		t.Errorf("the rest was not kept: %d W, %d CPUs, %d temperatures", inv.Power.Watts, len(inv.CPUs), len(inv.Thermal.Temperatures))
	}
}
