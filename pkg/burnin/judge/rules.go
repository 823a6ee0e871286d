package judge

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Subjects: how evidence names what it measured. pkg/burnin's readers and
// the rules below use the same functions, so a GPU the node has and the
// results lack is found by name.

// GPU names one GPU by the tool's (CUDA) index.
func GPU(i int) string { return "GPU " + strconv.Itoa(i) }

// Pair names a transfer from GPU src to GPU dst.
func Pair(src, dst int) string { return fmt.Sprintf("GPU %d -> GPU %d", src, dst) }

// HostToDevice and DeviceToHost name one GPU's transfers with host memory.
func HostToDevice(i int) string { return fmt.Sprintf("GPU %d host->device", i) }

// DeviceToHost: see HostToDevice.
func DeviceToHost(i int) string { return fmt.Sprintf("GPU %d device->host", i) }

// rule is how one check's evidence is judged.
type rule struct {
	tool     string // the tool's name in reasons
	noun     string // what one measurement is: "GPU", "pair", "disk"
	work     bool   // a measurement with Work 0 measured nothing
	workNoun string // what Work counts: "iterations"
	// valueUnit names a value of a check without a unit ("bogo ops/s").
	valueUnit string
	minGPUs   int // the check needs this many GPUs (pairs: 2)
	// expect lists the subjects the node's results must name; nil: any.
	expect func(c recipe.Check, inv Inventory) []string
	// filter keeps the measurements the check judges and, when none is
	// left, says why; nil: every measurement that is not a latency.
	filter func(c recipe.Check, vals []api.Measurement) ([]api.Measurement, string)
	// what names the part of the tool's output judged (a testcase).
	what func(c recipe.Check) string
}

// rules is the judgement of every burn-in check of the registry
// (pkg/recipe's checkDefs, stage burn-in; a test proves they match).
func rules() map[string]rule {
	return map[string]rule{
		"gpu-burn":       {tool: "gpu-burn", noun: "GPU", work: true, workNoun: "iterations", expect: perGPU},
		"cublas-gemm":    {tool: "matrixMulCUBLAS", noun: "GPU", work: true, workNoun: "checked runs", expect: perGPU},
		"clpeak":         {tool: "clpeak", noun: "GPU", expect: perGPU},
		"dcgm-diag":      {tool: "dcgmi diag", noun: "GPU", work: true, workNoun: "tests passed", valueUnit: "tests passed", expect: dcgmGPUs},
		"nccl-allreduce": {tool: "all_reduce_perf", noun: "size", filter: ncclRows},
		"nvbandwidth":    {tool: "nvbandwidth", noun: "cell", expect: nvbwCells, filter: bandwidthOnly(nvbwTestcase), what: nvbwTestcase},
		"cuda-bandwidth": {tool: "bandwidthTest", noun: "transfer", expect: hostTransfers},
		"cuda-p2p":       {tool: "p2pBandwidthLatencyTest", noun: "pair", minGPUs: 2, expect: allPairs, what: P2PMatrix},
		"stress-ng":      {tool: "stress-ng", noun: "stressor", work: true, workNoun: "bogo ops", valueUnit: "bogo ops/s"},
		"fio":            {tool: "fio", noun: "disk", work: true, workNoun: "bytes read", expect: dataDisks},
		"iperf3":         {tool: "iperf3", noun: "stream", work: true, workNoun: "bytes received"},
		"ib-write-bw":    {tool: "ib_write_bw", noun: "size", work: true, workNoun: "iterations"},
	}
}

// Checks lists the checks Judge knows, for the registry's test.
func Checks() []string {
	var out []string
	for k := range rules() {
		out = append(out, k)
	}
	return out
}

func (r rule) usable(c recipe.Check, vals []api.Measurement) ([]api.Measurement, string) {
	if r.filter != nil {
		return r.filter(c, vals)
	}
	return bandwidthOnly(nil)(c, vals)
}

// have says what the node has, after a list of missing subjects.
func (r rule) have(inv Inventory) string {
	switch {
	case r.expect == nil:
		return ""
	case r.noun == "disk":
		return fmt.Sprintf(" (the data disks are %s)", strings.Join(inv.Disks, ", "))
	}
	return fmt.Sprintf(" (the node has %d GPUs)", inv.GPUs)
}

func perGPU(_ recipe.Check, inv Inventory) []string {
	out := make([]string, 0, inv.GPUs)
	for i := range inv.GPUs {
		out = append(out, GPU(i))
	}
	return out
}

func allPairs(_ recipe.Check, inv Inventory) []string {
	var out []string
	for i := range inv.GPUs {
		for j := range inv.GPUs {
			if i != j {
				out = append(out, Pair(i, j))
			}
		}
	}
	return out
}

func hostTransfers(_ recipe.Check, inv Inventory) []string {
	var out []string
	for i := range inv.GPUs {
		out = append(out, HostToDevice(i), DeviceToHost(i))
	}
	return out
}

func dataDisks(_ recipe.Check, inv Inventory) []string { return inv.Disks }

// dcgmGPUs: DCGM's JSON names each GPU; its table says "Pass - All" for
// the GPUs of "GPU Device IDs Detected" (pkg/burnin reads them as each).
func dcgmGPUs(c recipe.Check, inv Inventory) []string { return perGPU(c, inv) }

// nvbwTestcase is the testcase an nvbandwidth check judges.
func nvbwTestcase(c recipe.Check) string {
	if t := c.Args["testcase"]; t != "" {
		return t
	}
	return "device_to_device_memcpy_read_ce"
}

// nvbwCells: a host/device testcase has a cell per GPU, a device to device
// one a cell per ordered pair; the others (all_to_host, one_to_all, ...)
// need a measurement.
func nvbwCells(c recipe.Check, inv Inventory) []string {
	tc := nvbwTestcase(c)
	switch {
	case strings.HasPrefix(tc, "host_to_device_"):
		return perDir(inv, HostToDevice)
	case strings.HasPrefix(tc, "device_to_host_"):
		return perDir(inv, DeviceToHost)
	case strings.HasPrefix(tc, "device_to_device_") && !strings.Contains(tc, "latency"):
		return allPairs(c, inv)
	}
	return nil
}

func perDir(inv Inventory, name func(int) string) []string {
	out := make([]string, 0, inv.GPUs)
	for i := range inv.GPUs {
		out = append(out, name(i))
	}
	return out
}

// P2PMatrix is the matrix of p2pBandwidthLatencyTest a cuda-p2p check
// judges: args.matrix, default unidirectional (P2P writes, enabled).
func P2PMatrix(c recipe.Check) string {
	if m := c.Args["matrix"]; m != "" {
		return m
	}
	return "unidirectional"
}

// bandwidthOnly keeps the rates; a check of bandwidth is never met by a
// latency (nvbandwidth's latency testcases print a SUM too).
func bandwidthOnly(what func(recipe.Check) string) func(recipe.Check, []api.Measurement) ([]api.Measurement, string) {
	return func(c recipe.Check, vals []api.Measurement) ([]api.Measurement, string) {
		var out []api.Measurement
		lat := 0
		for _, v := range vals {
			if v.Latency {
				lat++
				continue
			}
			out = append(out, v)
		}
		if len(out) == 0 && lat > 0 {
			name := "the output"
			if what != nil {
				name = what(c)
			}
			return nil, fmt.Sprintf("%s measures latency, not bandwidth: name a bandwidth testcase", name)
		}
		return out, ""
	}
}

// ncclSize is the message size an nccl-allreduce check is judged at: its
// args.size (the largest message the run goes to), default 8GiB.
func ncclSize(c recipe.Check) int64 {
	if s, err := recipe.ParseSize(c.Args["size"]); err == nil && s > 0 {
		return s.Bytes()
	}
	return 8 << 30
}

// ncclRows keeps the rows at or above the judged size.
func ncclRows(c recipe.Check, vals []api.Measurement) ([]api.Measurement, string) {
	at := ncclSize(c)
	var out []api.Measurement
	var largest int64
	for _, v := range vals {
		largest = max(largest, v.Size)
		if v.Size >= at {
			out = append(out, v)
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	why := fmt.Sprintf("no row at or above %s, the size the check judges", recipe.Size(at))
	if largest > 0 {
		why += fmt.Sprintf(" (the largest measured is %s)", recipe.Size(largest))
	}
	return nil, why
}
