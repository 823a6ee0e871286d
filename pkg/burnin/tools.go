package burnin

import (
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The command lines ingot runs each tool with. What each output means is
// in the evidence readers (evidence.go) and pkg/burnin/judge.

func seconds(b recipe.BurnIn, fallback int) string {
	s := int(b.Duration.D().Seconds())
	if s <= 0 {
		s = fallback
	}
	return strconv.Itoa(s)
}

func dcgmArgv(c recipe.Check, _ Plan) [][]string {
	level := c.Args["level"]
	if level == "" {
		level = "3"
	}
	return [][]string{{"diag", "-r", level, "-j"}}
}

// gpuBurnArgv runs gpu-burn in its default FP32 mode (the Gflop/s its
// threshold is written in) for the burn-in duration.
func gpuBurnArgv(_ recipe.Check, p Plan) [][]string {
	return [][]string{{seconds(p.BurnIn, 600)}}
}

// ncclArgv runs all_reduce_perf from 1 GiB up to the size the check is
// judged at (args.size, default 8GiB) on every GPU.
func ncclArgv(c recipe.Check, p Plan) [][]string {
	size := c.Args["size"]
	if size == "" {
		size = "8GiB"
	}
	end := "8G"
	if s, err := recipe.ParseSize(size); err == nil {
		end = strconv.FormatInt(s.Bytes(), 10)
	}
	gpus := p.GPUs
	if gpus <= 0 {
		gpus = 1
	}
	return [][]string{{"-b", "1G", "-e", end, "-f", "2", "-g", strconv.Itoa(gpus)}}
}

func nvbwTestcase(c recipe.Check) string {
	if t := c.Args["testcase"]; t != "" {
		return t
	}
	return "device_to_device_memcpy_read_ce"
}

func nvbwArgv(c recipe.Check, _ Plan) [][]string {
	return [][]string{{"-t", nvbwTestcase(c)}}
}

// stressArgv loads every CPU and two memory workers that take args.memory
// together (default 75% of memory, leaving the OS room).
func stressArgv(c recipe.Check, p Plan) [][]string {
	mem := c.Args["memory"]
	if mem == "" {
		mem = "75%"
	}
	return [][]string{{"--cpu", "0", "--vm", "2", "--vm-bytes", mem, "--timeout", seconds(p.BurnIn, 60) + "s", "--metrics-brief"}}
}

// fioArgv reads each data disk sequentially with direct I/O for the
// burn-in duration, at most a minute a disk: --readonly keeps fio from
// writing even by mistake.
func fioArgv(_ recipe.Check, p Plan) [][]string {
	b := p.BurnIn
	if b.Duration.D() <= 0 || b.Duration.D() > time.Minute {
		b.Duration = recipe.Duration(time.Minute)
	}
	var runs [][]string
	for _, d := range p.DataDisks {
		runs = append(runs, []string{"--name=ingot-burn-in", "--filename=" + d, "--readonly", "--rw=read", "--bs=1M",
			"--direct=1", "--ioengine=libaio", "--iodepth=32", "--runtime=" + seconds(b, 60), "--time_based", "--output-format=json"})
	}
	return runs
}

// perGPU runs argv(i) once for each GPU of the plan (at least one).
func perGPU(p Plan, argv func(i string) []string) [][]string {
	var runs [][]string
	for i := range max(p.GPUs, 1) {
		runs = append(runs, argv(strconv.Itoa(i)))
	}
	return runs
}

// cudaBandwidthArgv: the CUDA samples' bandwidthTest on one GPU at a time
// (with --device=all it adds the GPUs' bandwidths together), pinned host
// memory, its quick mode (32 MB transfers).
func cudaBandwidthArgv(_ recipe.Check, p Plan) [][]string {
	return perGPU(p, func(i string) []string { return []string{"--device=" + i, "--memory=pinned"} })
}

// p2pArgv: p2pBandwidthLatencyTest over every GPU; --p2p_read when the
// check judges the P2P read matrix.
func p2pArgv(c recipe.Check, _ Plan) [][]string {
	if c.Args["matrix"] == "unidirectional-read" {
		return [][]string{{"--p2p_read"}}
	}
	return [][]string{{}}
}

// cublasArgv: matrixMulCUBLAS on each GPU at its largest size (the sample
// caps -sizemult at 10: 1280x960 times 960x640), repeated on every GPU at
// once for the burn-in duration (the runner's repeat).
func cublasArgv(_ recipe.Check, p Plan) [][]string {
	return perGPU(p, func(i string) []string { return []string{"-device=" + i, "-sizemult=10"} })
}

// clpeakArgv: clpeak's one judged test (args.test, default compute-sp)
// on every OpenCL device.
func clpeakArgv(c recipe.Check, _ Plan) [][]string {
	flag, _ := clpeakTest(c)
	return [][]string{{"--" + flag}}
}
