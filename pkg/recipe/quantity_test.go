package recipe

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]struct {
		value float64
		unit  Unit
		text  string // String() of the result
	}{
		"400Gbps":      {4e11, UnitBitsPerSecond, "400Gbps"},
		"25Gbps":       {25e9, UnitBitsPerSecond, "25Gbps"},
		"100Mbps":      {1e8, UnitBitsPerSecond, "100Mbps"},
		"1.6Tbps":      {1.6e12, UnitBitsPerSecond, "1600Gbps"},
		" 1000 Mbps ":  {1e9, UnitBitsPerSecond, "1Gbps"},
		"2TiB":         {1 << 41, UnitBytes, "2TiB"},
		"512GiB":       {512 << 30, UnitBytes, "512GiB"},
		"768GiB":       {768 << 30, UnitBytes, "768GiB"},
		"512MiB":       {512 << 20, UnitBytes, "512MiB"},
		"3.84TB":       {3.84e12, UnitBytes, "3840GB"},
		"350GB/s":      {3.5e11, UnitBytesPerSecond, "350GB/s"},
		"20GiB/s":      {20 << 30, UnitBytesPerSecond, "20GiB/s"},
		"100B/s":       {100, UnitBytesPerSecond, "100B/s"},
		"600Tflop/s":   {6e14, UnitFlops, "600Tflop/s"},
		"50000Gflop/s": {5e13, UnitFlops, "50Tflop/s"},
		"0.5flop/s":    {0.5, UnitFlops, "0.5flop/s"},
		"1.5bps":       {1.5, UnitBitsPerSecond, "1.5bps"},
	} {
		q, err := ParseQuantity(in)
		if err != nil || q.Value != want.value || q.Unit != want.unit || q.String() != want.text {
			t.Errorf("ParseQuantity(%q) = %+v %q (%v), want %g %s %q", in, q, q.String(), err, want.value, want.unit, want.text)
			continue
		}
		if back, err := ParseQuantity(q.String()); err != nil || back != q {
			t.Errorf("%q: String %q reads back as %+v (%v)", in, q.String(), back, err)
		}
	}
	for _, bad := range []string{"400", "400G", "400gbps", "Gbps", "-1Gbps", "NaNGbps", "InfGiB", "1e400Gbps",
		"2 TiB/h", "600TFLOPS", "", "350GB/sec", "400Gbit/s"} {
		if q, err := ParseQuantity(bad); err == nil {
			t.Errorf("ParseQuantity(%q) = %+v, want an error", bad, q)
		} else if !strings.Contains(err.Error(), "e.g. 400Gbps") {
			t.Errorf("ParseQuantity(%q): message %q does not say what is expected", bad, err)
		}
	}
}

// TestQuantityJSON: a check travels to the agent as JSON (api.Task) and
// comes back equal; physical values travel as their text.
func TestQuantityJSON(t *testing.T) {
	mustQ := func(s string) Quantity {
		q, err := ParseQuantity(s)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	checks := []Check{
		{Name: "nic-link", Min: mustQ("400Gbps")},
		{Name: "memory-size", Min: mustQ("2TiB"), Max: mustQ("4TiB"), Args: map[string]string{"tolerance": "1"}},
		{Name: "gpu-count", Min: Number(8)},
		{Name: "gpu-burn", Min: mustQ("50000Gflop/s"), Optional: true},
		{Name: "nccl-allreduce", Min: mustQ("350GB/s"), Args: map[string]string{"size": "8GiB"}},
		{Name: "disk-health"},
	}
	b, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"nic-link","min":"400Gbps"},` +
		`{"name":"memory-size","min":"2TiB","max":"4TiB","args":{"tolerance":"1"}},` +
		`{"name":"gpu-count","min":8},` +
		`{"name":"gpu-burn","min":"50Tflop/s","optional":true},` +
		`{"name":"nccl-allreduce","min":"350GB/s","args":{"size":"8GiB"}},` +
		`{"name":"disk-health"}]`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	var back []Check
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(checks, back); diff != "" {
		t.Errorf("JSON round trip (-sent +received):\n%s", diff)
	}
	for _, bad := range []string{`{"name":"nic-link","min":"400"}`, `{"name":"nic-link","min":-1}`, `{"name":"nic-link","min":true}`} {
		var c Check
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("%s decoded as %+v", bad, c)
		}
	}
}

// TestQuantityYAML: an unquoted number is a plain number, a string needs
// its unit, and what lint then says about the unit.
func TestQuantityYAML(t *testing.T) {
	src := func(min string) []byte {
		return []byte("name: x\nversion: '1'\nacceptance:\n  checks:\n    - name: nic-link\n      min: " + min + "\n")
	}
	r, diags := Parse("x.yaml", src("400Gbps"))
	if len(diags) > 0 || r.Acceptance.Checks[0].Min != (Quantity{4e11, UnitBitsPerSecond}) {
		t.Errorf("400Gbps: %+v\n%s", r.Acceptance.Checks[0].Min, diagText(diags))
	}
	for min, want := range map[string]string{
		"400":     "6:12: error: acceptance.checks[0].min: 400 needs a unit for nic-link (bits per second), e.g. 400Gbps",
		`"400"`:   `found string "400"`,
		"400G":    `quantity "400G": expected a number and a unit`,
		".nan":    "expected a finite number >= 0, found .nan",
		"-5":      "expected a finite number >= 0, found -5",
		"[1]":     "expected a number, or a number with a unit such as 400Gbps, 2TiB, 350GB/s or 600Tflop/s, found a list",
		"50GB/s":  "50GB/s is in bytes per second; nic-link needs bits per second, e.g. 50Gbps",
		"1.5Gbps": "", // a whole number of Mbps: fine
	} {
		_, diags := Parse("x.yaml", src(min))
		got := diagText(diags)
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("min: %s: got\n%s\nwant %q", min, got, want)
		}
	}
	if q := Number(math.Pi); q.String() != "3.141592653589793" || q.Unit.Physical() {
		t.Errorf("Number(pi) = %s", q)
	}
}
