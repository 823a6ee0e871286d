package firmware_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

const testUser, testPassword = "ingot", "s3cret-pass"

// repoRoot is the module root.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

func mockupDir(t testing.TB, name string) string {
	return filepath.Join(repoRoot(t), "testdata", "redfish-mockups", name)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startBMC serves a mockup from a virtual BMC on loopback.
func startBMC(t testing.TB, mockup string, mod func(*vbmc.Config)) (*vbmc.BMC, string) {
	t.Helper()
	cfg := vbmc.Config{Root: mockupDir(t, mockup), Username: testUser, Password: testPassword}
	if mod != nil {
		mod(&cfg)
	}
	b, err := vbmc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv.URL
}

// testConfig is bmc.Config scaled down for tests.
func testConfig(url string) bmc.Config {
	return bmc.Config{Endpoint: url, Username: testUser, Password: testPassword,
		ConnectTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, RetryWait: 20 * time.Millisecond, Retries: 2,
		PollInterval: 10 * time.Millisecond, PowerOffTimeout: 2 * time.Second}
}

func dial(t testing.TB, url string) *bmc.Client {
	t.Helper()
	c, err := bmc.Dial(ctxT(t), testConfig(url))
	if err != nil {
		t.Fatalf("Dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
