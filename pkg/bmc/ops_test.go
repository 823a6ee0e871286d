package bmc_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestBIOSApplyResetVerify(t *testing.T) {
	cases := map[string]struct {
		mockup   string
		set      map[string]any
		stuck    []string
		fallback bool
	}{
		"settings object": {mockup: "dmtf-public-rackmount1",
			set: map[string]any{"PowerProfile": "Efficiency", "NicBoot2": "NetworkBoot"}, stuck: []string{"NicBoot2"}},
		"AMI fallback (no SettingsObject)": {mockup: "gigabyte-ami-h262-z63",
			set: map[string]any{"FBO001": "LEGACY"}, fallback: true},
		"Cray fallback (attributes are objects)": {mockup: "hpe-cray-ex235n-a100",
			set: map[string]any{"Continue On Error": "Enabled"}, fallback: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, url := startBMC(t, tc.mockup, vbmc.Faults{}, tc.stuck...)
			c := dial(t, testConfig(url))
			defer closeAndCheckSessions(t, c, b)
			ctx := ctxT(t)
			res, err := c.ApplyBIOS(ctx, tc.set)
			if err != nil {
				t.Fatalf("ApplyBIOS: %v", err)
			}
			if (res.Fallback != "") != tc.fallback || !res.Pending || len(res.Changed) != len(tc.set) {
				t.Errorf("ApplyBIOS result %+v: want fallback=%v, pending, %d changed", res, tc.fallback, len(tc.set))
			}
			// Pending until reset: nothing in effect yet.
			before, err := c.VerifyBIOS(ctx, tc.set)
			if err != nil {
				t.Fatal(err)
			}
			if len(before) != len(tc.set) {
				t.Errorf("before the reset %d attributes mismatch, want all %d pending: %v", len(before), len(tc.set), before)
			}
			if err := c.PowerCycle(ctx); err != nil {
				t.Fatalf("PowerCycle: %v", err)
			}
			after, err := c.VerifyBIOS(ctx, tc.set)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, m := range after {
				names = append(names, m.Name)
			}
			if d := cmp.Diff(tc.stuck, names); d != "" {
				t.Errorf("attributes that did not stick (-want +got):\n%s", d)
			}
		})
	}
}

func TestBIOSUnknownAttributeRefused(t *testing.T) {
	b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	_, err := c.ApplyBIOS(ctxT(t), map[string]any{"NoSuchKnob": "x"})
	var be *bmc.Error
	if !errors.As(err, &be) || be.Kind != bmc.KindInvalid || !strings.Contains(err.Error(), "NoSuchKnob") || be.Endpoint != url {
		t.Fatalf("err = %v, want KindInvalid naming NoSuchKnob and the endpoint", err)
	}
}

func TestBootOverride(t *testing.T) {
	cases := map[string]struct {
		mockup, target, uri string
		wantKind            bmc.Kind // 0: success
	}{
		"pxe allowed":             {mockup: "dmtf-public-rackmount1", target: bmc.BootPxe},
		"uefi http refused":       {mockup: "dmtf-public-rackmount1", target: bmc.BootUefiHTTP, uri: "http://127.0.0.1/boot.efi", wantKind: bmc.KindUnsupported},
		"uefi http allowed (AMI)": {mockup: "gigabyte-ami-h262-z63", target: bmc.BootUefiHTTP, uri: "http://127.0.0.1/boot.efi"},
		"no Boot object (Cray)":   {mockup: "hpe-cray-ex235n-a100", target: bmc.BootPxe, wantKind: bmc.KindUnsupported},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, url := startBMC(t, tc.mockup, vbmc.Faults{})
			c := dial(t, testConfig(url))
			defer closeAndCheckSessions(t, c, b)
			ctx := ctxT(t)
			err := c.SetBootOverride(ctx, tc.target, tc.uri, true)
			if tc.wantKind != 0 {
				var be *bmc.Error
				if !errors.As(err, &be) || be.Kind != tc.wantKind {
					t.Fatalf("err = %v, want kind %v", err, tc.wantKind)
				}
				if tc.wantKind == bmc.KindUnsupported && tc.mockup == "dmtf-public-rackmount1" && !strings.Contains(err.Error(), "Pxe") {
					t.Errorf("error %q does not name the allowed targets", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SetBootOverride: %v", err)
			}
			got, err := c.GetBootOverride(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.Target != tc.target || got.Enabled != "Once" || got.URI != tc.uri {
				t.Errorf("boot override now %+v, want %s Once %q", got, tc.target, tc.uri)
			}
		})
	}
}

func TestPower(t *testing.T) {
	// The tower allows GracefulShutdown and PowerCycle; the Cray blade only
	// On, ForceOff and Off, so off is forced and cycle is ForceOff then On.
	for _, mockup := range []string{"dmtf-public-tower", "hpe-cray-ex235n-a100"} {
		t.Run(mockup, func(t *testing.T) { testPower(t, mockup) })
	}
}

func testPower(t *testing.T, mockup string) {
	b, url := startBMC(t, mockup, vbmc.Faults{})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	ctx := ctxT(t)
	steps := []struct {
		name string
		do   func(context.Context) error
		want string
	}{
		{"off", c.PowerOff, "Off"},
		{"off again", c.PowerOff, "Off"},
		{"on", c.PowerOn, "On"},
		{"cycle", c.PowerCycle, "On"},
		{"off", c.PowerOff, "Off"},
		{"cycle from off", c.PowerCycle, "On"},
	}
	for _, s := range steps {
		if err := s.do(ctx); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, err := c.PowerState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want || b.Power() != s.want {
			t.Fatalf("after %s: client sees %s, BMC has %s; want %s", s.name, got, b.Power(), s.want)
		}
	}
}

func TestRotatePassword(t *testing.T) {
	b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	c := dial(t, testConfig(url))
	ctx := ctxT(t)
	const newPass = "n3w-Passw0rd"
	if err := c.RotatePassword(ctx, "", newPass); err != nil {
		t.Fatalf("RotatePassword: %v", err)
	}
	// The rotated client keeps working, on a session of the new password.
	if _, err := c.PowerState(ctx); err != nil {
		t.Fatalf("client after rotation: %v", err)
	}
	closeAndCheckSessions(t, c, b)
	// The old password is gone; the new one logs in.
	if _, err := bmc.Dial(ctx, testConfig(url)); !bmc.IsKind(err, bmc.KindAuth) {
		t.Fatalf("Dial with the old password: err = %v, want KindAuth", err)
	}
	cfg := testConfig(url)
	cfg.Password = newPass
	c2 := dial(t, cfg)
	closeAndCheckSessions(t, c2, b)
}

func TestAuthFailureIsTypedAndLeavesNoSession(t *testing.T) {
	b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	cfg := testConfig(url)
	cfg.Password = "wrong"
	_, err := bmc.Dial(ctxT(t), cfg)
	var be *bmc.Error
	if !errors.As(err, &be) || be.Kind != bmc.KindAuth || be.Status != 401 || be.Endpoint != url {
		t.Fatalf("err = %#v, want KindAuth HTTP 401 naming %s", err, url)
	}
	if n := b.OpenSessions(); n != 0 {
		t.Errorf("%d sessions open after a failed Dial", n)
	}
}

func TestBasicAuthFallback(t *testing.T) {
	// A BMC that refuses sessions (405 on the Sessions collection, as some
	// older BMCs do): the client falls back to HTTP basic auth and still
	// reads. The refusal is a thin edge wrapper around the real virtual BMC.
	b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, "supermicro-hgx-b200-partial"), Username: testUser, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Sessions") {
			http.Error(w, `{"error":{"code":"Base.1.0.ActionNotSupported","message":"sessions disabled"}}`, http.StatusMethodNotAllowed)
			return
		}
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := dial(t, testConfig(srv.URL))
	defer closeAndCheckSessions(t, c, b)
	if !c.BasicAuth() {
		t.Error("BasicAuth() = false, want the fallback on a BMC without sessions")
	}
	if st, err := c.PowerState(ctxT(t)); err != nil || st != "On" {
		t.Errorf("PowerState = %q, %v", st, err)
	}
}

func TestFirmwareAndMedia(t *testing.T) {
	b, url := startBMC(t, "gigabyte-ami-h262-z63", vbmc.Faults{})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	ctx := ctxT(t)
	fw, err := c.FirmwareInventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fw) < 2 || fw[0].Component != "BIOS" || fw[1].Component != "BMC" || fw[1].Version != "12.84.13" {
		t.Errorf("firmware = %+v, want BIOS, BMC 12.84.13, ...", fw)
	}
	if err := c.InsertMedia(ctx, "http://127.0.0.1/agent.iso"); err != nil {
		t.Fatalf("InsertMedia: %v", err)
	}
	if err := c.EjectMedia(ctx); err != nil {
		t.Fatalf("EjectMedia: %v", err)
	}
}

func TestCanceledContext(t *testing.T) {
	b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.PowerState(ctx); !bmc.IsKind(err, bmc.KindCanceled) {
		t.Fatalf("err = %v, want KindCanceled", err)
	}
}

func TestRotatePasswordOfAnotherAccount(t *testing.T) {
	b, url := startBMC(t, "gigabyte-ami-h262-z63", vbmc.Faults{})
	c := dial(t, testConfig(url))
	ctx := ctxT(t)
	if err := c.RotatePassword(ctx, "root", "admin-N3W"); err != nil {
		t.Fatalf("RotatePassword(root): %v", err)
	}
	if err := c.RotatePassword(ctx, "nobody", "x"); !bmc.IsKind(err, bmc.KindNotFound) {
		t.Errorf("rotating an unknown account: %v, want KindNotFound", err)
	}
	// Our own login is untouched; the other account logs in with its new password.
	if _, err := c.PowerState(ctx); err != nil {
		t.Fatal(err)
	}
	closeAndCheckSessions(t, c, b)
	cfg := testConfig(url)
	cfg.Username, cfg.Password = "root", "admin-N3W"
	closeAndCheckSessions(t, dial(t, cfg), b)
}

func TestBootMode(t *testing.T) {
	for _, mode := range []string{bmc.ModeLegacy, bmc.ModeUEFI} {
		t.Run(mode, func(t *testing.T) {
			b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
			c := dial(t, testConfig(url))
			defer closeAndCheckSessions(t, c, b)
			ctx := ctxT(t)
			if err := c.SetBootMode(ctx, mode); err != nil {
				t.Fatalf("SetBootMode(%s): %v", mode, err)
			}
			st, err := c.GetBootState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode != mode || st.Power == "" {
				t.Errorf("boot state %+v after SetBootMode(%s)", st, mode)
			}
		})
	}
	b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	var be *bmc.Error
	if err := c.SetBootMode(ctxT(t), "CSM"); !errors.As(err, &be) || be.Kind != bmc.KindInvalid {
		t.Errorf("SetBootMode(CSM): %v, want an invalid-argument error", err)
	}
}

func TestNodeWatts(t *testing.T) {
	b, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	w, err := c.NodeWatts(ctxT(t))
	if err != nil || w != 344 {
		t.Fatalf("NodeWatts = %d, %v; want the mockup's PowerConsumedWatts 344", w, err)
	}
	// The HPE Cray capture has no power readings: an error, never 0 W.
	b2, url2 := startBMC(t, "hpe-cray-ex235n-a100", vbmc.Faults{})
	c2 := dial(t, testConfig(url2))
	defer closeAndCheckSessions(t, c2, b2)
	if w, err := c2.NodeWatts(ctxT(t)); err == nil {
		t.Errorf("NodeWatts on a BMC without readings = %d, want an error", w)
	}
}
