package bmc_test

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

// mockups are the Redfish trees every client test runs against.
var mockups = []string{
	"dmtf-public-rackmount1",
	"dmtf-public-tower",
	"gigabyte-ami-h262-z63",
	"hpe-cray-ex235n-a100",
	"hpe-ilo5-xl675d-a40",
	"supermicro-hgx-b200-partial",
}

// mockupDir finds testdata/redfish-mockups/NAME under the module root.
func mockupDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "testdata", "redfish-mockups", name)
	if _, err := os.Stat(filepath.Join(p, "redfish", "v1", "index.json")); err != nil {
		t.Fatalf("mockup %s: %v (expected testdata/redfish-mockups/%s/redfish/v1/index.json in the repository)", name, err, name)
	}
	return p
}

const testUser, testPassword = "ingot", "s3cret-pass"

// startBMC serves mockup name from a virtual BMC on loopback.
func startBMC(t testing.TB, name string, f vbmc.Faults, stuck ...string) (*vbmc.BMC, string) {
	t.Helper()
	b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, name), Username: testUser, Password: testPassword,
		Faults: f, StuckBIOS: stuck, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv.URL
}

// testConfig is Config scaled down for tests: short waits, same policy.
func testConfig(url string) bmc.Config {
	return bmc.Config{Endpoint: url, Username: testUser, Password: testPassword,
		ConnectTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, RetryWait: 50 * time.Millisecond,
		PollInterval: 10 * time.Millisecond, PowerOffTimeout: 2 * time.Second}
}

func dial(t testing.TB, cfg bmc.Config) *bmc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := bmc.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("Dial %s: %v", cfg.Endpoint, err)
	}
	return c
}

// closeAndCheckSessions closes c and fails when the BMC kept a session.
func closeAndCheckSessions(t testing.TB, c *bmc.Client, b *vbmc.BMC) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n := b.OpenSessions(); n != 0 {
		t.Errorf("%d sessions left open on the BMC after Close, want 0", n)
	}
}
