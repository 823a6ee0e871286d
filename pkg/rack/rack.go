// Package rack reads racks.yaml, the reviewed file beside the recipes that
// declares each rack's power: its feed, breaker, derating, the margin kept
// for machines starting up, its PUE and tariff. Machines name their rack;
// power reports, capacity planning and rollouts judge watts against the
// rack's budget.
package rack

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// File is the racks file's name inside the recipes folder (the recipe
// loader skips it).
const File = "racks.yaml"

// MaxFileSize bounds the file, like a recipe's.
const MaxFileSize = 1 << 20

// Rack is one rack's power envelope.
type Rack struct {
	Name string `yaml:"name" json:"name"`
	// FeedVolts is the feed's voltage (line to line for three phases).
	FeedVolts float64 `yaml:"feed_volts" json:"feed_volts"`
	Phases    int     `yaml:"phases" json:"phases"` // 1 or 3
	// BreakerAmps is the breaker's rating per phase; DeratingPct the share
	// of it planned for continuous load (default 80, as electrical codes
	// ask for continuous loads).
	BreakerAmps float64 `yaml:"breaker_amps" json:"breaker_amps"`
	DeratingPct float64 `yaml:"derating_pct,omitempty" json:"derating_pct,omitempty"`
	// StartupMarginWatts is kept free for machines powering on (fans at
	// full speed, GPUs initialising) on top of what runs.
	StartupMarginWatts float64 `yaml:"startup_margin_watts,omitempty" json:"startup_margin_watts,omitempty"`
	PUE                float64 `yaml:"pue,omitempty" json:"pue,omitempty"`
	TariffPerKWh       float64 `yaml:"tariff_per_kwh,omitempty" json:"tariff_per_kwh,omitempty"`
}

// BudgetWatts is what the rack may draw continuously: volts x amps (x
// sqrt(3) for three phases) x derating, less the start-up margin.
func (r Rack) BudgetWatts() float64 {
	w := r.FeedVolts * r.BreakerAmps
	if r.Phases == 3 {
		w *= math.Sqrt(3)
	}
	d := r.DeratingPct
	if d == 0 {
		d = 80
	}
	return w*d/100 - r.StartupMarginWatts
}

// Load reads dir/racks.yaml; a missing file is no racks, not an error.
func Load(dir string) ([]Rack, error) {
	path := filepath.Join(dir, File)
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("racks: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("racks: %s: expected a regular file of at most %d bytes", path, MaxFileSize)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("racks: %w", err)
	}
	return Parse(path, b)
}

// Parse reads a racks file; errors name the file, the line and the field.
func Parse(path string, b []byte) ([]Rack, error) {
	var doc struct {
		Racks []yaml.Node `yaml:"racks"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %v (expected racks: [ {name, feed_volts, phases, breaker_amps, ...} ])", path, err)
	}
	var out []Rack
	var errs []string
	seen := map[string]int{}
	for _, n := range doc.Racks {
		var r Rack
		if err := n.Decode(&r); err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", path, n.Line, err))
			continue
		}
		// KnownFields does not reach into nodes: check the keys here.
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; !slices.Contains(fields, k) {
				errs = append(errs, fmt.Sprintf("%s:%d: rack %q: unknown field %q (expected one of %s)", path, n.Content[i].Line, r.Name, k, strings.Join(fields, ", ")))
			}
		}
		for _, p := range r.problems() {
			errs = append(errs, fmt.Sprintf("%s:%d: rack %q: %s", path, n.Line, r.Name, p))
		}
		if l, dup := seen[r.Name]; dup {
			errs = append(errs, fmt.Sprintf("%s:%d: rack %q: declared again (first at line %d)", path, n.Line, r.Name, l))
		}
		seen[r.Name] = n.Line
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return out, nil
}

var fields = []string{"name", "feed_volts", "phases", "breaker_amps", "derating_pct", "startup_margin_watts", "pue", "tariff_per_kwh"}

func (r Rack) problems() []string {
	var p []string
	if err := machine.CheckDNSName(r.Name); err != nil {
		p = append(p, fmt.Sprintf("name: %v", err))
	}
	if r.FeedVolts < 100 || r.FeedVolts > 1000 {
		p = append(p, fmt.Sprintf("feed_volts %g: expected the feed's voltage, 100-1000 (e.g. 230, or 415 line to line for three phases)", r.FeedVolts))
	}
	if r.Phases != 1 && r.Phases != 3 {
		p = append(p, fmt.Sprintf("phases %d: expected 1 or 3", r.Phases))
	}
	if r.BreakerAmps <= 0 || r.BreakerAmps > 400 {
		p = append(p, fmt.Sprintf("breaker_amps %g: expected the breaker's rating per phase, 1-400", r.BreakerAmps))
	}
	if r.DeratingPct < 0 || r.DeratingPct > 100 {
		p = append(p, fmt.Sprintf("derating_pct %g: expected 1-100 (default 80 for continuous load)", r.DeratingPct))
	}
	if r.StartupMarginWatts < 0 {
		p = append(p, "startup_margin_watts: expected 0 or more")
	}
	if r.PUE != 0 && (r.PUE < 1 || r.PUE > 3) {
		p = append(p, fmt.Sprintf("pue %g: expected 1.0-3.0", r.PUE))
	}
	if r.TariffPerKWh < 0 {
		p = append(p, "tariff_per_kwh: expected 0 or more")
	}
	if len(p) == 0 && r.BudgetWatts() <= 0 {
		p = append(p, fmt.Sprintf("startup_margin_watts %g leaves no budget (%.0f W before the margin)", r.StartupMarginWatts, r.BudgetWatts()+r.StartupMarginWatts))
	}
	return p
}
