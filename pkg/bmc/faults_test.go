package bmc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// flaky is the fault profile: 30% of requests answered 503, every
// request delayed 1 s. RetryWait is scaled down to 50 ms (the policy is the
// same); Retries is raised to 10 so that a request failing 11 times in a row
// (0.3^11, about 2e-6) rather than 6 (7e-4) is what it takes to flake.
var flaky = vbmc.Faults{Error503: 0.3, Latency: time.Second}

func flakyConfig(url string) bmc.Config {
	cfg := testConfig(url)
	cfg.Retries = 10
	return cfg
}

func TestFaultsEveryOperationSucceeds(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps about a minute of injected latency")
	}
	t.Run("inventory", func(t *testing.T) {
		t.Parallel()
		const name = "supermicro-hgx-b200-partial"
		b, url := startBMC(t, name, flaky)
		c := dial(t, flakyConfig(url))
		inv, err := c.Inventory(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		closeAndCheckSessions(t, c, b)
		// Same inventory as without faults: the golden file.
		b0, url0 := startBMC(t, name, vbmc.Faults{})
		c0 := dial(t, testConfig(url0))
		clean, err := c0.Inventory(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		closeAndCheckSessions(t, c0, b0)
		g, _ := json.Marshal(inv)
		w, _ := json.Marshal(clean)
		if d := cmp.Diff(string(w), string(g)); d != "" {
			t.Errorf("inventory under faults differs (-clean +faulty):\n%s", d)
		}
		if st := b.Stats(); st.MaxInFlight > 2 {
			t.Errorf("BMC saw %d requests in flight, limit 2", st.MaxInFlight)
		}
	})
	// The operations run as two independent sequences on two BMCs, in
	// parallel, to halve the injected waiting.
	type op struct {
		name string
		do   func(context.Context, *bmc.Client) error
	}
	sequences := map[string][]op{
		"boot and power": {
			{"boot override", func(ctx context.Context, c *bmc.Client) error { return c.SetBootOverride(ctx, bmc.BootPxe, "", true) }},
			{"power off", func(ctx context.Context, c *bmc.Client) error { return c.PowerOff(ctx) }},
			{"power on", func(ctx context.Context, c *bmc.Client) error { return c.PowerOn(ctx) }},
		},
		"bios": {
			{"bios apply", func(ctx context.Context, c *bmc.Client) error {
				_, err := c.ApplyBIOS(ctx, map[string]any{"PowerProfile": "Efficiency"})
				return err
			}},
			{"power cycle", func(ctx context.Context, c *bmc.Client) error { return c.PowerCycle(ctx) }},
			{"bios verify", func(ctx context.Context, c *bmc.Client) error {
				m, err := c.VerifyBIOS(ctx, map[string]any{"PowerProfile": "Efficiency"})
				if err == nil && len(m) > 0 {
					err = errors.New("did not stick: " + m[0].String())
				}
				return err
			}},
		},
	}
	for name, ops := range sequences {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, url := startBMC(t, "dmtf-public-rackmount1", flaky)
			c := dial(t, flakyConfig(url))
			ctx := ctxT(t)
			for _, op := range ops {
				if err := op.do(ctx, c); err != nil {
					t.Fatalf("%s under 30%% 503 + 1 s latency: %v", op.name, err)
				}
			}
			closeAndCheckSessions(t, c, b)
			if st := b.Stats(); st.MaxInFlight > 2 {
				t.Errorf("BMC saw %d requests in flight, limit 2", st.MaxInFlight)
			}
		})
	}
}

func TestHungBMCTimesOut(t *testing.T) {
	cases := map[string]struct {
		hang string
		dial bool // the hang hits Dial itself
	}{
		"hung system resource": {hang: "/redfish/v1/Systems/437XR1138R2"},
		"hung service":         {hang: "/redfish", dial: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{Hang: []string{tc.hang}})
			cfg := testConfig(url)
			cfg.ReadTimeout = 500 * time.Millisecond
			start := time.Now()
			var err error
			if tc.dial {
				_, err = bmc.Dial(context.Background(), cfg)
			} else {
				c := dial(t, cfg)
				_, err = c.PowerState(context.Background())
				closeAndCheckSessions(t, c, b)
			}
			took := time.Since(start)
			var be *bmc.Error
			if !errors.As(err, &be) || be.Kind != bmc.KindTimeout {
				t.Fatalf("err = %v, want KindTimeout", err)
			}
			if !strings.Contains(err.Error(), url) || be.Endpoint != url {
				t.Errorf("error %q does not name the BMC %s", err, url)
			}
			if took > 3*cfg.ReadTimeout {
				t.Errorf("took %v, want about the read timeout %v (a read timeout is not retried)", took, cfg.ReadTimeout)
			}
		})
	}
}

func TestDroppedConnectionsAreRetried(t *testing.T) {
	// 20% of connections closed without an answer: reads are retried and
	// the inventory is whole.
	const name = "dmtf-public-rackmount1"
	b, url := startBMC(t, name, vbmc.Faults{DropConn: 0.2})
	cfg := testConfig(url)
	cfg.Retries = 10
	c := dial(t, cfg)
	inv, err := c.Inventory(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	closeAndCheckSessions(t, c, b)
	if len(inv.Problems) != 0 || inv.Power.Watts != 344 {
		t.Errorf("inventory under dropped connections: %d W, problems %v", inv.Power.Watts, inv.Problems)
	}
}

func TestCallContextCancelsInFlightRequest(t *testing.T) {
	// gofish keeps the context it connected with; each call must still be
	// bounded by its own ctx. The BMC hangs; the read timeout is long; the
	// call's 200 ms deadline ends it.
	b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{Hang: []string{"/redfish/v1/Systems/437XR1138R2"}})
	c := dial(t, testConfig(url)) // ReadTimeout 10 s
	defer closeAndCheckSessions(t, c, b)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.PowerState(ctx)
	if !bmc.IsKind(err, bmc.KindTimeout) {
		t.Fatalf("err = %v, want KindTimeout", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("call took %v, want about its 200 ms deadline", took)
	}
}
