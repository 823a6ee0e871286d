package telemetry

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// SELEvery is how often a BMC's event log is read: less often than its
// power and temperatures (each read is 8-10 requests).
const SELEvery = 10 * time.Minute

// SELReader reads each BMC's event log every `every` and returns the
// entries that appeared since its last read. The first read of a BMC sets
// the mark at its newest entry (the BMC's clock, not ours): history before
// serve started is not news.
type SELReader struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	marks map[string]selMark // machine ID
}

type selMark struct {
	read   time.Time // when we last read it
	newest time.Time // the newest entry's Created then
}

// NewSELReader reads each BMC's log every `every`, on the clock now (nil:
// time.Now).
func NewSELReader(every time.Duration, now func() time.Time) *SELReader {
	if now == nil {
		now = time.Now
	}
	return &SELReader{every: every, now: now, marks: map[string]selMark{}}
}

func (r *SELReader) Read(ctx context.Context, c *bmc.Client, machineID string, log *slog.Logger) []string {
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

// BMCReader reads machines' BMCs for the poller, through pool (one session
// per BMC, shared with the engine and inspect), logging in with what each
// machine's credential reference names under the policy creds returns;
// sel, when set, adds the event log entries that are new.
func BMCReader(pool *bmc.Pool, creds func() credential.Policy, sel *SELReader, log *slog.Logger) Reader {
	return func(ctx context.Context, m *machine.Machine) Sample {
		fail := func(err error) Sample { return Sample{Err: err.Error(), MemCorrectable: -1, MemUncorrectable: -1} }
		user, pass, err := creds().Resolve(m)
		if err != nil {
			return fail(err)
		}
		c, err := pool.Get(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass, Insecure: m.BMC.Insecure,
			Logger: log.With("bmc", m.BMC.Endpoint)})
		if err != nil {
			return fail(err)
		}
		r, err := c.Readings(ctx)
		if err != nil {
			return fail(err)
		}
		s := SampleOf(r)
		if sel != nil {
			s.SEL = sel.Read(ctx, c, m.ID, log)
		}
		return s
	}
}

// SampleOf turns the BMC's readings into what telemetry judges.
func SampleOf(r bmc.Readings) Sample {
	s := Sample{Time: r.Taken, Up: true, PowerOn: strings.EqualFold(r.PowerState, "On"), Watts: r.NodeWatts,
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
