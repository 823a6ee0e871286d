package serve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// The rollout wave gate fails a machine telemetry never sampled in its
// window (it used to pass it), naming the machine.
func TestWaveCheckNeedsSamples(t *testing.T) {
	tel, err := telemetry.New(telemetry.Config{
		Machines: func(context.Context) ([]machine.Machine, error) { return nil, nil },
		Read:     func(context.Context, *machine.Machine) telemetry.Sample { return telemetry.Sample{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	node := waveCheck(tel)(context.Background(), &machine.Machine{ID: "m-1", Name: "gpu-07"}, &recipe.Recipe{Name: "r"}, from, from.Add(time.Hour))
	if !strings.Contains(node.Problem, "gpu-07: no telemetry sample") {
		t.Errorf("problem %q; want the machine named with no samples", node.Problem)
	}
}
