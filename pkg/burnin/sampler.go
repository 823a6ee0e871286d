package burnin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
)

// sampler reads nvidia-smi every Every while a GPU load runs, and the
// kernel log's Xids before and after it.
type sampler struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	sum    Summary
	errs   []string
	before map[string]bool // Xid lines in the kernel log before the load
	// problems are what could not be read: each fails the check (a gate
	// without evidence is no pass).
	problems []string
}

// nvidiaSMIQuery is the sampling query ParseGPUSamples reads.
var nvidiaSMIQuery = []string{"--query-gpu=index,pci.bus_id,temperature.gpu,power.draw,clocks_throttle_reasons.active", "--format=csv,noheader,nounits"}

func (r *Runner) startSampler(ctx context.Context) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), before: map[string]bool{}}
	log, problem := r.kernelXids(ctx)
	if problem != "" {
		s.problems = append(s.problems, "before the load: "+problem)
	}
	for _, ev := range log.Events {
		s.before[ev.Raw] = true
	}
	every := r.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			r.sampleOnce(ctx, s)
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (r *Runner) sampleOnce(ctx context.Context, s *sampler) {
	out, err := r.exec()(ctx, "nvidia-smi", nvidiaSMIQuery...)
	if err != nil && len(out) == 0 {
		s.mu.Lock()
		s.errs = append(s.errs, err.Error())
		s.mu.Unlock()
		return
	}
	samples, perr := ParseGPUSamples(out)
	s.mu.Lock()
	defer s.mu.Unlock()
	if perr != nil {
		s.errs = append(s.errs, perr.Error())
		return
	}
	s.sum.AddSamples(samples)
}

// kernelXids reads the kernel log's Xid events. A log that cannot be read,
// or that holds an Xid line ParseXIDs cannot read, is a problem named with
// its cause and line: the Xid gate has no evidence then.
func (r *Runner) kernelXids(ctx context.Context) (XIDLog, string) {
	out, err := r.exec()(ctx, "dmesg")
	if err != nil {
		return XIDLog{}, fmt.Sprintf("the kernel log could not be read (dmesg: %v): Xid errors unknown", err)
	}
	log, err := ParseXIDs(out)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && pe.Line > 0 {
			return log, fmt.Sprintf("kernel log line %d is an Xid report ingot cannot read: %q", pe.Line, pe.Text)
		}
		return log, "reading the kernel log: " + err.Error()
	}
	return log, ""
}

// finishSampler stops sampling and returns what the load showed: per GPU
// its samples and maxima, the Xids the load caused (those not in the log
// before it), and what could not be read. The metrics keep the maxima and
// counts with the job.
func (r *Runner) finishSampler(ctx context.Context, s *sampler) (*api.LoadEvidence, map[string]float64) {
	close(s.stop)
	<-s.done
	log, problem := r.kernelXids(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	load := &api.LoadEvidence{Problems: s.problems}
	if problem != "" {
		load.Problems = append(load.Problems, "after the load: "+problem)
	}
	for _, ev := range log.Events {
		if !s.before[ev.Raw] {
			load.Xids = append(load.Xids, api.Xid{PCI: ev.PCI, Code: ev.Code, Text: clip(ev.Message)})
		}
	}
	metrics := map[string]float64{"xid_errors": float64(len(load.Xids))}
	var maxT, maxW float64
	for _, g := range s.sum.GPUs() {
		maxT, maxW = max(maxT, g.MaxTempCelsius), max(maxW, g.MaxPowerWatts)
		load.GPUs = append(load.GPUs, api.GPULoad{PCI: g.PCI, Index: g.Index, Samples: g.Samples,
			MaxTempC: g.MaxTempCelsius, MaxPowerWatts: g.MaxPowerWatts, Lost: g.Lost})
	}
	metrics["max_gpu_temp_c"], metrics["max_gpu_power_w"] = maxT, maxW
	metrics["gpus_sampled"] = float64(len(load.GPUs))
	if len(load.GPUs) == 0 && len(s.errs) > 0 {
		load.Problems = append(load.Problems, "nvidia-smi gave no samples: "+s.errs[0])
	}
	return load, metrics
}
