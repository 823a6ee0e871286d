package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

const bmcTestUser, bmcTestPass = "admin", "pa55-word"

// startTestBMC serves a mockup from a virtual BMC on loopback.
func startTestBMC(t *testing.T, mockup string) (*vbmc.BMC, string) {
	t.Helper()
	b, err := vbmc.New(vbmc.Config{Root: vbmcMockup(t, mockup), Username: bmcTestUser, Password: bmcTestPass})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv.URL
}

func TestBMCCommands(t *testing.T) {
	b, url := startTestBMC(t, "dmtf-public-rackmount1")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(bmcTestPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--endpoint", url, "--user", bmcTestUser, "--password-file", pw}
	ingot := func(args ...string) (string, error) {
		t.Helper()
		out, errOut, err := runIngot(t, append(args, conn...)...)
		if err != nil {
			t.Logf("ingot %s: stderr:\n%s", strings.Join(args, " "), errOut)
		}
		return out, err
	}

	out, err := ingot("bmc", "inventory", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var inv machine.Inventory
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("inventory JSON: %v\n%s", err, out)
	}
	if inv.Power.Watts != 344 || len(inv.PSUs) != 2 || inv.Taken.IsZero() {
		t.Errorf("inventory: %d W, %d PSUs, taken %v; want 344 W, 2 PSUs, a time", inv.Power.Watts, len(inv.PSUs), inv.Taken)
	}
	if out, err = ingot("bmc", "inventory"); err != nil || !strings.Contains(out, "Power:    344 W") {
		t.Errorf("table inventory (err %v):\n%s", err, out)
	}

	steps := []struct {
		args    []string
		want    string // substring of stdout
		wantErr bool
	}{
		{args: []string{"bmc", "power", "off"}, want: "Off"},
		{args: []string{"bmc", "power", "status"}, want: "Off"},
		{args: []string{"bmc", "power", "on"}, want: "On"},
		{args: []string{"bmc", "boot", "--target", "Pxe", "--once"}, want: "boot override: Pxe (Once)"},
		{args: []string{"bmc", "boot", "--target", "UefiHttp", "--uri", "http://127.0.0.1/x.efi"}, wantErr: true},
		{args: []string{"bmc", "bios", "set", "PowerProfile=Efficiency"}, want: "staged 1 attribute(s)"},
		{args: []string{"bmc", "bios", "verify", "PowerProfile=Efficiency"}, want: "PowerProfile: want Efficiency, BIOS has MaxPerf", wantErr: true},
		{args: []string{"bmc", "power", "cycle"}, want: "On"},
		{args: []string{"bmc", "bios", "verify", "PowerProfile=Efficiency"}, want: "all 1 attribute(s) in effect"},
		{args: []string{"bmc", "bios", "get"}, want: "PowerProfile"},
	}
	for _, s := range steps {
		out, err := ingot(s.args...)
		if (err != nil) != s.wantErr || !strings.Contains(out, s.want) {
			t.Fatalf("ingot %s: err %v (want error: %v), stdout:\n%s\nwant it to contain %q", strings.Join(s.args, " "), err, s.wantErr, out, s.want)
		}
	}
	if n := b.OpenSessions(); n != 0 {
		t.Errorf("%d BMC sessions left open by the CLI", n)
	}
}

func TestBMCCommandErrors(t *testing.T) {
	_, url := startTestBMC(t, "dmtf-public-rackmount1")
	cases := map[string][]string{
		"no endpoint":       {"bmc", "inventory", "--user", "u", "--password-file", "/nonexistent"},
		"no credentials":    {"bmc", "inventory", "--endpoint", url},
		"wrong password":    {"bmc", "inventory", "--endpoint", url, "--cred", "env:INGOT_TEST_BMC_CRED"},
		"bad power verb":    {"bmc", "power", "sideways", "--endpoint", url, "--cred", "env:INGOT_TEST_BMC_GOOD"},
		"bad attribute arg": {"bmc", "bios", "set", "novalue", "--endpoint", url, "--cred", "env:INGOT_TEST_BMC_GOOD"},
	}
	t.Setenv("INGOT_TEST_BMC_CRED", bmcTestUser+":wrong")
	t.Setenv("INGOT_TEST_BMC_GOOD", bmcTestUser+":"+bmcTestPass)
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := runIngot(t, args...); err == nil {
				t.Errorf("ingot %s succeeded, want an error", strings.Join(args, " "))
			}
		})
	}
}

func TestParseAttrValue(t *testing.T) {
	got := map[string]any{}
	for _, in := range []string{"true", "false", "42", "-1", `"1"`, "Enabled", "1.5", "True"} {
		got[in] = parseAttrValue(in)
	}
	want := map[string]any{"true": true, "false": false, "42": int64(42), "-1": int64(-1), `"1"`: "1",
		"Enabled": "Enabled", "1.5": "1.5", "True": "True"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("parseAttrValue (-want +got):\n%s", d)
	}
}
