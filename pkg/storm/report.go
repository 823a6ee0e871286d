package storm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is what a storm measured, machine by machine.
type Report struct {
	Config   Config          `json:"config"`
	Machines []MachineResult `json:"machines"`
	Wall     time.Duration   `json:"wall"` // the storm's start to the last machine's end
	// ClientCPU is the storm process's CPU time (RunIn): the load
	// generator's share of the machine.
	ClientCPU time.Duration `json:"client_cpu"`
}

// MachineResult is one machine's boot.
type MachineResult struct {
	MAC       string        `json:"mac"`
	Firmware  Firmware      `json:"firmware"`
	PowerOn   time.Duration `json:"power_on"` // offset from the storm's start
	IP        string        `json:"ip,omitempty"`
	Moved     bool          `json:"moved,omitempty"` // iPXE was leased another address
	MachineID string        `json:"machine_id,omitempty"`
	Kernel    string        `json:"kernel,omitempty"`
	Initrd    string        `json:"initrd,omitempty"`
	Steps     []StepResult  `json:"steps"`
	Failed    string        `json:"failed,omitempty"` // the step that failed
	Err       string        `json:"err,omitempty"`
}

// StepResult is one step of one machine.
type StepResult struct {
	Step   string        `json:"step"`
	Start  time.Duration `json:"start"` // offsets from the storm's start
	End    time.Duration `json:"end"`
	Resent int           `json:"resent,omitempty"` // requests sent again after a timeout (DHCP, TFTP) or retried (API)
	NAKs   int           `json:"naks,omitempty"`   // DHCP: NAKs that sent the machine back to DISCOVER
	// Wait is how long the server took to start answering: TFTP, its
	// first packet (resends included); HTTP, the response headers.
	Wait  time.Duration `json:"wait,omitempty"`
	Bytes int64         `json:"bytes,omitempty"`
	Note  string        `json:"note,omitempty"`
	Err   string        `json:"err,omitempty"`
}

// Took is the step's duration.
func (s StepResult) Took() time.Duration { return s.End - s.Start }

// step returns the named step, if the machine got to it.
func (m MachineResult) step(name string) (StepResult, bool) {
	for _, s := range m.Steps {
		if s.Step == name {
			return s, true
		}
	}
	return StepResult{}, false
}

// Reached is how long after its power-on the machine finished step name
// (false: it did not).
func (m MachineResult) Reached(name string) (time.Duration, bool) {
	s, ok := m.step(name)
	if !ok || s.Err != "" {
		return 0, false
	}
	return s.End - m.PowerOn, true
}

// StepStats sums one step over every machine.
type StepStats struct {
	Step             string
	OK, Failed       int
	Resent           int           // resends over all machines
	Resenders        int           // machines that resent at least once
	NAKs             int           // DHCP NAKs over all machines
	P50, P99, Max    time.Duration // of the step's duration, machines that completed it
	WaitP50, WaitP99 time.Duration // of its Wait
	Bytes            int64
	FirstErrs        []string // up to 3 distinct failures
}

// Summary is a Report in a few numbers.
type Summary struct {
	Machines, Failed int
	Steps            []StepStats
	// Until is, per step in Until order, how long after the storm's start
	// the last machine finished it (only when every machine did).
	Until map[string]time.Duration
	// Per machine, its power-on to the end of the step (initrd, the full
	// path): median and 99th percentile, machines that got there.
	P50, P99 map[string]time.Duration
}

// Summarize counts every step of every machine.
func (r *Report) Summarize(steps []string) Summary {
	s := Summary{Machines: len(r.Machines), Until: map[string]time.Duration{}, P50: map[string]time.Duration{}, P99: map[string]time.Duration{}}
	for _, m := range r.Machines {
		if m.Failed != "" {
			s.Failed++
		}
	}
	for _, name := range steps {
		st := StepStats{Step: name}
		var took, reached, wait []time.Duration
		var last time.Duration
		for _, m := range r.Machines {
			sr, ok := m.step(name)
			st.Resent += sr.Resent
			st.NAKs += sr.NAKs
			if sr.Resent > 0 {
				st.Resenders++
			}
			switch {
			case !ok:
				continue
			case sr.Err != "":
				st.Failed++
				if len(st.FirstErrs) < 3 && !slices.Contains(st.FirstErrs, sr.Err) {
					st.FirstErrs = append(st.FirstErrs, sr.Err)
				}
				continue
			}
			st.OK++
			st.Bytes += sr.Bytes
			took = append(took, sr.Took())
			wait = append(wait, sr.Wait)
			reached = append(reached, sr.End-m.PowerOn)
			last = max(last, sr.End)
		}
		st.P50, st.P99, st.Max = percentile(took, 50), percentile(took, 99), percentile(took, 100)
		st.WaitP50, st.WaitP99 = percentile(wait, 50), percentile(wait, 99)
		if st.OK == len(r.Machines) {
			s.Until[name] = last
		}
		s.P50[name], s.P99[name] = percentile(reached, 50), percentile(reached, 99)
		s.Steps = append(s.Steps, st)
	}
	return s
}

// percentile is the p-th percentile (nearest rank) of ds; 0 when empty.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(rank, 1)-1]
}

// Check fails unless every machine completed every step in steps: each
// step's count of successes is the number of machines.
func (s Summary) Check() error {
	var errs []error
	for _, st := range s.Steps {
		if st.OK != s.Machines {
			errs = append(errs, fmt.Errorf("step %s: %d of %d machines completed it (%d failed there): %s",
				st.Step, st.OK, s.Machines, st.Failed, strings.Join(st.FirstErrs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// String is the summary as a table for a test log.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d machines, %d failed\n", s.Machines, s.Failed)
	fmt.Fprintf(&b, "%-10s %5s %6s %9s %9s %9s %9s %9s %9s %11s %9s\n", "step", "ok", "failed", "resent/by", "p50", "p99", "max",
		"wait p50", "wait p99", "all done at", "MB")
	for _, st := range s.Steps {
		until := "-"
		if d, ok := s.Until[st.Step]; ok {
			until = ms(d)
		}
		fmt.Fprintf(&b, "%-10s %5d %6d %9s %9s %9s %9s %9s %9s %11s %9.1f\n", st.Step, st.OK, st.Failed,
			fmt.Sprintf("%d/%d", st.Resent, st.Resenders), ms(st.P50), ms(st.P99), ms(st.Max), ms(st.WaitP50), ms(st.WaitP99),
			until, float64(st.Bytes)/1e6)
		if st.NAKs > 0 {
			fmt.Fprintf(&b, "    %d NAKs sent machines back to DISCOVER\n", st.NAKs)
		}
		for _, e := range st.FirstErrs {
			fmt.Fprintf(&b, "    failed: %s\n", e)
		}
	}
	return b.String()
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
