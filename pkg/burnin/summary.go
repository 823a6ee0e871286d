package burnin

import (
	"cmp"
	"slices"
)

// Summary folds GPU samples and Xid events, taken while load runs, into one
// record per GPU. GPUs are keyed by NormalizePCI of their address, so a Xid
// (which names only the PCI address) lands on the GPU its samples describe.
// The zero value is ready to use; a Summary is not safe for concurrent use.
type Summary struct {
	gpus map[string]*GPUSummary
}

// GPUSummary is one GPU over a sampling window. Max values are 0 when the
// GPU never reported them.
type GPUSummary struct {
	PCI             string // NormalizePCI form, "0000:18:00"
	Index           int    // nvidia-smi index; -1 if only Xids named this GPU
	Samples         int
	MaxTempCelsius  float64
	MaxPowerWatts   float64
	ThrottleReasons uint64 // OR of every clocks_throttle_reasons.active seen
	Lost            bool   // nvidia-smi could not reach it
	XIDs            int
	XIDCodes        []int // distinct codes, first seen first
}

func (s *Summary) gpu(addr string) *GPUSummary {
	if s.gpus == nil {
		s.gpus = map[string]*GPUSummary{}
	}
	key := NormalizePCI(addr)
	g, ok := s.gpus[key]
	if !ok {
		g = &GPUSummary{PCI: key, Index: -1}
		s.gpus[key] = g
	}
	return g
}

// AddSamples folds in one parse of nvidia-smi samples.
func (s *Summary) AddSamples(samples GPUSamples) {
	for _, v := range samples.Samples {
		g := s.gpu(v.PCIBusID)
		g.Index = v.Index
		g.Samples++
		if v.TempCelsius != nil {
			g.MaxTempCelsius = max(g.MaxTempCelsius, *v.TempCelsius)
		}
		if v.PowerWatts != nil {
			g.MaxPowerWatts = max(g.MaxPowerWatts, *v.PowerWatts)
		}
		if v.ThrottleReasons != nil {
			g.ThrottleReasons |= *v.ThrottleReasons
		}
	}
	for _, l := range samples.Lost {
		s.gpu(l.PCIBusID).Lost = true
	}
}

// AddXIDs folds in one parse of a kernel log.
func (s *Summary) AddXIDs(log XIDLog) {
	for _, ev := range log.Events {
		g := s.gpu(ev.PCI)
		g.XIDs++
		if !slices.Contains(g.XIDCodes, ev.Code) {
			g.XIDCodes = append(g.XIDCodes, ev.Code)
		}
	}
}

// GPUs returns a copy of every GPU seen, ordered by index (Xid-only GPUs,
// index -1, first) and then PCI address.
func (s *Summary) GPUs() []GPUSummary {
	out := make([]GPUSummary, 0, len(s.gpus))
	for _, g := range s.gpus {
		c := *g
		c.XIDCodes = slices.Clone(g.XIDCodes)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b GPUSummary) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.PCI, b.PCI))
	})
	return out
}
