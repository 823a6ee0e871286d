package telemetry

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// BucketSize is the aggregates' resolution; Retention how long they are
// kept (in memory: 7 days x 288 buckets x 40 bytes = 80 KiB a machine,
// 40 MiB for 500; BenchmarkPoll500Store measured 57 MiB of heap with the
// slices' spare capacity).
const (
	BucketSize = 5 * time.Minute
	Retention  = 7 * 24 * time.Hour
)

// Bucket aggregates one machine's samples of one 5-minute span. Fields are
// float32: a watt or a tenth of a degree is all a report needs.
type Bucket struct {
	start      int64 // unix seconds
	n, nw, npw uint16
	sumW, maxW float32
	maxInlet   float32
	maxGPU     float32
	psuIn      float32
	psuOut     float32
}

// Start is the bucket's first second.
func (b Bucket) Start() time.Time { return time.Unix(b.start, 0).UTC() }

// MeanWatts is the mean of the bucket's watt readings; 0 none.
func (b Bucket) MeanWatts() float64 {
	if b.nw == 0 {
		return 0
	}
	return float64(b.sumW) / float64(b.nw)
}

// MaxWatts, MaxInletC and MaxGPUC are the bucket's highest readings.
func (b Bucket) MaxWatts() float64  { return float64(b.maxW) }
func (b Bucket) MaxInletC() float64 { return float64(b.maxInlet) }
func (b Bucket) MaxGPUC() float64   { return float64(b.maxGPU) }

// PSUWatts are the summed PSU input and output watts of the readings
// that had both (for measured efficiency).
func (b Bucket) PSUWatts() (in, out float64) { return float64(b.psuIn), float64(b.psuOut) }

// Aggregator keeps each machine's buckets for Retention. Safe for
// concurrent use.
type Aggregator struct {
	mu   sync.Mutex
	by   map[string][]Bucket  // machine ID -> buckets, oldest first
	sums map[string][]Summary // machine ID -> daily summaries, oldest first
}

// NewAggregator makes an empty aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{by: map[string][]Bucket{}, sums: map[string][]Summary{}}
}

// Add counts a sample into its machine's bucket and drops buckets older
// than Retention before it. Samples of a BMC that did not answer, and 0 W
// readings, count for nothing.
func (a *Aggregator) Add(s Sample) {
	if !s.Up || s.Time.IsZero() {
		return
	}
	start := s.Time.Truncate(BucketSize).Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	bs := a.by[s.Machine]
	if len(bs) == 0 || bs[len(bs)-1].start < start {
		bs = append(bs, Bucket{start: start})
	}
	i := len(bs) - 1
	if bs[i].start != start { // a sample older than the last bucket: find its own
		j, found := slices.BinarySearchFunc(bs, start, func(b Bucket, t int64) int { return cmp64(b.start, t) })
		if !found {
			bs = slices.Insert(bs, j, Bucket{start: start})
		}
		i = j
	}
	b := &bs[i]
	b.n++
	if s.Watts > 0 {
		b.nw++
		b.sumW += float32(s.Watts)
		b.maxW = max(b.maxW, float32(s.Watts))
	}
	b.maxInlet = max(b.maxInlet, float32(s.InletC))
	b.maxGPU = max(b.maxGPU, float32(s.GPUMaxC))
	if s.PSUInputWatts > 0 && s.PSUOutputWatts > 0 {
		b.npw++
		b.psuIn += float32(s.PSUInputWatts)
		b.psuOut += float32(s.PSUOutputWatts)
	}
	cut := s.Time.Add(-Retention).Unix()
	k := 0
	for k < len(bs) && bs[k].start < cut {
		k++
	}
	a.by[s.Machine] = bs[k:]
}

// Window returns a machine's buckets that start in [from, to).
func (a *Aggregator) Window(machineID string, from, to time.Time) []Bucket {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Bucket
	for _, b := range a.by[machineID] {
		if t := b.Start(); !t.Before(from) && t.Before(to) {
			out = append(out, b)
		}
	}
	return out
}

// Forget drops a machine's buckets and summaries (it was removed).
func (a *Aggregator) Forget(machineID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.by, machineID)
	delete(a.sums, machineID)
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Peak is the highest watts, inlet and GPU temperature of a machine's
// buckets overlapping [from, to], and how many there were.
func (a *Aggregator) Peak(machineID string, from, to time.Time) (watts, inletC, gpuC float64, n int) {
	for _, b := range a.Window(machineID, from.Truncate(BucketSize), to.Add(time.Nanosecond)) {
		watts, inletC, gpuC = max(watts, b.MaxWatts()), max(inletC, b.MaxInletC()), max(gpuC, b.MaxGPUC())
		n++
	}
	return watts, inletC, gpuC, n
}

// UnderLoad judges peaks against limits: what was crossed, "" nothing.
func UnderLoad(l Limits, watts, inletC, gpuC float64) string {
	var p []string
	if l.LoadWatts > 0 && watts > l.LoadWatts*(1+l.WattsMarginPct/100) {
		p = append(p, fmt.Sprintf("%.0f W, above load_watts %.0f + %.0f%%", watts, l.LoadWatts, l.WattsMarginPct))
	}
	if inletC > l.InletMaxC {
		p = append(p, fmt.Sprintf("inlet %.1f °C, above %.0f °C", inletC, l.InletMaxC))
	}
	if gpuC > l.GPUMaxC {
		p = append(p, fmt.Sprintf("GPU %.1f °C, above %.0f °C", gpuC, l.GPUMaxC))
	}
	return strings.Join(p, ", ")
}

func slicesSortBuckets(bs []Bucket) {
	slices.SortFunc(bs, func(a, b Bucket) int { return cmp64(a.start, b.start) })
}
