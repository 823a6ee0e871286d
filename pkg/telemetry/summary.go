package telemetry

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// SummaryRetention is how long daily summaries are kept: a year, so a
// report over a month or a quarter (cost per GPU-hour against a bill)
// needs no Prometheus.
const SummaryRetention = 366 * 24 * time.Hour

// Summary is one machine's day, made from its 5-minute buckets once the
// day is over (UTC): the mean, median and p95 of the buckets' mean watts,
// the highest readings and the PSU sums. It is 42 bytes stored; a year of
// them is 15 KiB a machine, 7.5 MiB for 500, and 500 machines add 21 KiB
// a day.
type Summary struct {
	day                     int64  // unix seconds of the day's 00:00 UTC
	buckets                 uint16 // 5-minute spans with a watt reading
	meanW, p50W, p95W, maxW float32
	maxInlet, maxGPU        float32
	psuIn, psuOut           float32
}

// Day is the summary's day (00:00 UTC).
func (s Summary) Day() time.Time { return time.Unix(s.day, 0).UTC() }

// Buckets counts the day's 5-minute spans with a watt reading (288 a full day).
func (s Summary) Buckets() int { return int(s.buckets) }

// MeanWatts, MedianWatts and P95Watts are of the day's 5-minute means.
func (s Summary) MeanWatts() float64   { return float64(s.meanW) }
func (s Summary) MedianWatts() float64 { return float64(s.p50W) }
func (s Summary) P95Watts() float64    { return float64(s.p95W) }

// MaxWatts, MaxInletC and MaxGPUC are the day's highest readings.
func (s Summary) MaxWatts() float64  { return float64(s.maxW) }
func (s Summary) MaxInletC() float64 { return float64(s.maxInlet) }
func (s Summary) MaxGPUC() float64   { return float64(s.maxGPU) }

// PSUWatts are the day's summed PSU input and output watts.
func (s Summary) PSUWatts() (in, out float64) { return float64(s.psuIn), float64(s.psuOut) }

// Summarize makes day's summary from its buckets (those outside the day
// are ignored); ok is false when none had a reading.
func Summarize(day time.Time, bs []Bucket) (Summary, bool) {
	start := day.UTC().Truncate(24 * time.Hour)
	end := start.Add(24 * time.Hour)
	s := Summary{day: start.Unix()}
	var means []float64
	for _, b := range bs {
		if t := b.Start(); t.Before(start) || !t.Before(end) {
			continue
		}
		if w := b.MeanWatts(); w > 0 {
			means = append(means, w)
		}
		s.maxW, s.maxInlet, s.maxGPU = max(s.maxW, b.maxW), max(s.maxInlet, b.maxInlet), max(s.maxGPU, b.maxGPU)
		s.psuIn, s.psuOut = s.psuIn+b.psuIn, s.psuOut+b.psuOut
	}
	if len(means) == 0 && s.maxInlet == 0 && s.maxGPU == 0 {
		return Summary{}, false
	}
	s.buckets = uint16(len(means))
	if len(means) > 0 {
		s.meanW, s.p50W, s.p95W = float32(mean(means)), float32(quantile(means, 0.5)), float32(quantile(means, 0.95))
	}
	return s, true
}

const summaryBytes = 8 + 2 + 8*4

// encodeSummary writes a summary in a fixed little-endian layout.
func encodeSummary(s Summary) []byte {
	out := make([]byte, 0, summaryBytes)
	out = binary.LittleEndian.AppendUint64(out, uint64(s.day))
	out = binary.LittleEndian.AppendUint16(out, s.buckets)
	for _, f := range []float32{s.meanW, s.p50W, s.p95W, s.maxW, s.maxInlet, s.maxGPU, s.psuIn, s.psuOut} {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(f))
	}
	return out
}

// decodeSummary reads encodeSummary's layout; a record of another length
// is damaged and named by the caller.
func decodeSummary(b []byte) (Summary, error) {
	if len(b) != summaryBytes {
		return Summary{}, fmt.Errorf("%d bytes: expected a %d-byte daily summary", len(b), summaryBytes)
	}
	s := Summary{day: int64(binary.LittleEndian.Uint64(b)), buckets: binary.LittleEndian.Uint16(b[8:])}
	f := func(j int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[10+4*j:])) }
	s.meanW, s.p50W, s.p95W, s.maxW, s.maxInlet, s.maxGPU, s.psuIn, s.psuOut = f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)
	return s, nil
}

// summarize makes the summaries of every machine's complete days (before
// now's day) not summarized yet, keeps them, drops those older than
// SummaryRetention, and returns the new ones by machine.
func (a *Aggregator) summarize(now time.Time) map[string][]Summary {
	today := now.UTC().Truncate(24 * time.Hour)
	cut := now.Add(-SummaryRetention).Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sums == nil {
		a.sums = map[string][]Summary{}
	}
	out := map[string][]Summary{}
	for id, bs := range a.by {
		have := a.sums[id]
		var last int64 = math.MinInt64
		if len(have) > 0 {
			last = have[len(have)-1].day
		}
		for i := 0; i < len(bs); {
			day := bs[i].Start().Truncate(24 * time.Hour)
			j := i
			for j < len(bs) && bs[j].Start().Before(day.Add(24*time.Hour)) {
				j++
			}
			if day.Before(today) && day.Unix() > last {
				if s, ok := Summarize(day, bs[i:j]); ok {
					have = append(have, s)
					out[id] = append(out[id], s)
				}
			}
			i = j
		}
		k := 0
		for k < len(have) && have[k].day < cut {
			k++
		}
		a.sums[id] = have[k:]
	}
	return out
}

// Summaries returns a machine's daily summaries of days in [from, to).
func (a *Aggregator) Summaries(machineID string, from, to time.Time) []Summary {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Summary
	for _, s := range a.sums[machineID] {
		if t := s.Day(); !t.Before(from.UTC().Truncate(24*time.Hour)) && t.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// restoreSummaries puts stored summaries back (at start).
func (a *Aggregator) restoreSummaries(machineID string, ss []Summary) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sums == nil {
		a.sums = map[string][]Summary{}
	}
	cur := append(a.sums[machineID], ss...)
	slices.SortFunc(cur, func(x, y Summary) int { return cmp64(x.day, y.day) })
	cur = slices.CompactFunc(cur, func(x, y Summary) bool { return x.day == y.day })
	a.sums[machineID] = cur
}
