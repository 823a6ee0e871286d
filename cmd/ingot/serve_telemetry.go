package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// telemetryConfig is serve's telemetry settings.
type telemetryConfig struct {
	Interval     time.Duration // 0: no polling
	Webhook      string
	Alertmanager string
	RacksDir     string // the recipes folder, holding racks.yaml
}

// newTelemetry builds the BMC poller over the fleet's machines and
// credentials, reading through pool (one session per BMC, shared with
// the engine and inspect).
func newTelemetry(c telemetryConfig, st store.Store, fl *fleet.Service, recipes func(string) (*recipe.Recipe, error), pool *bmc.Pool, log *slog.Logger) (*telemetry.Service, error) {
	ts, _ := st.(store.TelemetryStore) // states and aggregates survive a restart
	var notify []telemetry.Notifier
	if c.Webhook != "" {
		notify = append(notify, telemetry.Webhook{URL: c.Webhook})
	}
	if c.Alertmanager != "" {
		notify = append(notify, telemetry.Alertmanager{URL: c.Alertmanager})
	}
	sel := newSELReader(selEvery)
	return telemetry.New(telemetry.Config{
		Machines: func(ctx context.Context) ([]machine.Machine, error) { return fl.List(ctx, store.MachineFilter{}) },
		Read: func(ctx context.Context, m *machine.Machine) telemetry.Sample {
			return readBMC(ctx, pool, fl.Credentials(), m, sel, log)
		},
		Recipes: recipes,
		Event:   func(ctx context.Context, id, msg string) { fl.Note(ctx, id, "alert", "telemetry", msg) },
		SEL: func(ctx context.Context, id string, entries []string) {
			msg := fmt.Sprintf("BMC event log: %d new entries: %s", len(entries), strings.Join(entries[:min(len(entries), 5)], "; "))
			if len(entries) > 5 {
				msg += fmt.Sprintf("; and %d more (ingot job evidence or the BMC's log has them all)", len(entries)-5)
			}
			fl.Note(ctx, id, "bmc.sel", "telemetry", msg)
		},
		Notify:   notify,
		Interval: c.Interval,
		Logger:   log.With("service", "telemetry"),
		Racks:    racksIn(c.RacksDir, log),
		Store:    ts,
	})
}

// racksIn reads dir/racks.yaml at each use (a reviewed change takes effect
// without a restart); a broken file is logged and judged as no racks.
func racksIn(dir string, log *slog.Logger) func() []rack.Rack {
	if dir == "" {
		return nil
	}
	return func() []rack.Rack {
		rs, err := rack.Load(dir)
		if err != nil {
			log.Warn("racks.yaml not read: no rack budgets apply until it is fixed", "err", err)
		}
		return rs
	}
}

// readBMC polls one machine's BMC through the shared pool.
func readBMC(ctx context.Context, pool *bmc.Pool, creds credential.Policy, m *machine.Machine, sel *selReader, log *slog.Logger) telemetry.Sample {
	user, pass, err := creds.Resolve(m.BMC.CredentialRef)
	if err != nil {
		return telemetry.Sample{Err: err.Error(), MemCorrectable: -1, MemUncorrectable: -1}
	}
	c, err := pool.Get(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass, Insecure: m.BMC.Insecure,
		Logger: log.With("bmc", m.BMC.Endpoint)})
	if err != nil {
		return telemetry.Sample{Err: err.Error(), MemCorrectable: -1, MemUncorrectable: -1}
	}
	r, err := c.Readings(ctx)
	if err != nil {
		return telemetry.Sample{Err: err.Error(), MemCorrectable: -1, MemUncorrectable: -1}
	}
	s := sampleOf(r)
	if sel != nil {
		s.SEL = sel.read(ctx, c, m.ID, log)
	}
	return s
}

// selEvery is how often a BMC's event log is read: less often than its
// power and temperatures (each read is 8-10 requests).
const selEvery = 10 * time.Minute

// selReader reads each BMC's event log every `every` and returns the
// entries that appeared since its last read. The first read of a BMC sets
// the mark at its newest entry (the BMC's clock, not ours): history before
// serve started is not news.
type selReader struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	marks map[string]selMark // machine ID
}

type selMark struct {
	read   time.Time // when we last read it
	newest time.Time // the newest entry's Created then
}

func newSELReader(every time.Duration) *selReader {
	return &selReader{every: every, now: time.Now, marks: map[string]selMark{}}
}

func (r *selReader) read(ctx context.Context, c *bmc.Client, machineID string, log *slog.Logger) []string {
	r.mu.Lock()
	mk, seen := r.marks[machineID]
	due := !seen || r.now().Sub(mk.read) >= r.every
	r.mu.Unlock()
	if !due {
		return nil
	}
	since := mk.newest.Add(time.Nanosecond)
	if !seen {
		since = time.Time{}
	}
	entries, err := c.EventLog(ctx, since, 200)
	if err != nil {
		log.Debug("telemetry: event log not read", "machine", machineID, "err", err)
		return nil
	}
	mk.read = r.now()
	var out []string
	for _, e := range entries {
		if e.Created.After(mk.newest) {
			mk.newest = e.Created
		}
		if seen && !e.Created.IsZero() {
			out = append(out, e.String())
		}
	}
	r.mu.Lock()
	r.marks[machineID] = mk
	r.mu.Unlock()
	return out
}

// sampleOf turns the BMC's readings into what telemetry judges.
func sampleOf(r bmc.Readings) telemetry.Sample {
	s := telemetry.Sample{Time: r.Taken, Up: true, PowerOn: strings.EqualFold(r.PowerState, "On"), Watts: r.NodeWatts,
		PSURedundancyLost: strings.EqualFold(r.PSURedundancy, "Lost"), MemCorrectable: r.MemoryCorrectable,
		MemUncorrectable: r.MemoryUncorrectable, Path: r.Path, Problems: r.Problems}
	carrying := 0 // supplies with input power
	for _, p := range r.PSUs {
		if p.InputWatts > 0 {
			carrying++
		}
	}
	for _, p := range r.PSUs {
		s.PSUInputWatts += p.InputWatts
		s.PSUOutputWatts += p.OutputWatts
		// An empty bay (Absent) is not a loss: the BMC's redundancy group
		// says whether the supplies left are enough. A present supply in
		// Critical health is one; so is (the telemetry path carries numbers
		// only) a supply at 0 W while the host runs on the others.
		absent := strings.EqualFold(p.State, "Absent")
		dead := p.Health == "" && p.InputWatts == 0 && p.OutputWatts == 0 && s.PowerOn && carrying > 0
		if (strings.EqualFold(p.Health, "Critical") || dead) && !absent {
			s.PSURedundancyLost = true
		}
	}
	for _, t := range r.Temperatures {
		switch t.Kind {
		case bmc.TempInlet:
			s.InletC = max(s.InletC, t.Celsius)
		case bmc.TempExhaust:
			s.ExhaustC = max(s.ExhaustC, t.Celsius)
		case bmc.TempCPU:
			s.CPUMaxC = max(s.CPUMaxC, t.Celsius)
		case bmc.TempGPU:
			s.GPUMaxC = max(s.GPUMaxC, t.Celsius)
		}
	}
	for _, f := range r.Fans {
		// Health Critical, or (the telemetry path carries numbers only) a
		// fan standing still while the host runs.
		if strings.EqualFold(f.Health, "Critical") || (f.Health == "" && f.RPM == 0 && f.Percent == 0 && s.PowerOn) {
			s.FansFailed = append(s.FansFailed, f.Name)
		}
	}
	for _, d := range r.Drives {
		if d.PredictedFailure {
			s.DrivesPredicted = append(s.DrivesPredicted, d.Name)
		}
	}
	for _, g := range r.GPUs {
		if g.Health != "" && !strings.EqualFold(g.Health, "OK") {
			s.GPUsUnhealthy = append(s.GPUsUnhealthy, g.Name)
		}
	}
	return s
}

// waveCheck gates rollout waves on what telemetry measured of each
// machine while its job ran (its burn-in): peak watts and temperatures
// against its recipe's alert limits.
func waveCheck(tel *telemetry.Service) engine.WaveCheck {
	return func(_ context.Context, m *machine.Machine, r *recipe.Recipe, from, to time.Time) engine.WaveNode {
		w, inlet, gpu, n := tel.Aggregates().Peak(m.ID, from, to)
		node := engine.WaveNode{Watts: w, InletC: inlet, GPUMaxC: gpu}
		if n > 0 {
			node.Problem = telemetry.UnderLoad(telemetry.LimitsOf(r), w, inlet, gpu)
		}
		return node
	}
}
