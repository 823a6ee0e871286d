package telemetry

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The generated rules file passes promtool (Debian's prometheus package,
// in .ci/deps) and carries each recipe's limits.
func TestPrometheusRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian package prometheus, in .ci/deps): ", err)
	}
	b, err := PrometheusRules([]*recipe.Recipe{
		{Name: "gpu-h100", Power: recipe.Power{LoadWatts: 10200}, Alerts: recipe.Alerts{InletCelsiusMax: 32, For: recipe.Duration(3 * time.Minute)}},
		{Name: "base", Template: true},
		{Name: "cpu-node"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "ingot.rules.yml")
	os.WriteFile(f, b, 0o644)
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, b)
	}
	for _, want := range []string{`sensor="inlet"} > 32`, "for: 3m", `ingot_node_power_watts{recipe="gpu-h100"} > 11220`, "name: ingot-cpu-node", "IngotAlert"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("rules lack %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "ingot-base") {
		t.Error("a template got rules")
	}
}
