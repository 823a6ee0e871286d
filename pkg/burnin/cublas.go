package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const toolCUBLAS = "matrixMulCUBLAS"

var (
	mmStartRe = regexp.MustCompile(`^\[Matrix Multiply CUBLAS\] - Starting\.\.\.`)
	// `GPU Device 0: "NVIDIA H100 80GB HBM3" with compute capability 9.0`
	mmDeviceRe = regexp.MustCompile(`^GPU Device (\d+): "([^"]*)" with compute capability`)
	// "MatrixA(640,480), MatrixB(480,320), MatrixC(640,320)"
	mmSizeRe = regexp.MustCompile(`^MatrixA\((\d+),(\d+)\), MatrixB\((\d+),(\d+)\), MatrixC\((\d+),(\d+)\)$`)
	// "Performance= 8227.70 GFlop/s, Time= 0.024 msec, Size= 196608000 Ops"
	mmPerfRe = regexp.MustCompile(`^Performance=\s*(\S+) GFlop/s, Time=\s*(\S+) msec, Size=\s*(\S+) Ops`)
	// "Comparing CUBLAS Matrix Multiply with CPU results: PASS"
	mmCompareRe = regexp.MustCompile(`^Comparing CUBLAS Matrix Multiply with CPU results: (PASS|FAIL)$`)
	// printDiff's last line on a miscompare: "Total Errors = 1234"
	mmErrorsRe = regexp.MustCompile(`^Total Errors = (-?\d+)$`)
)

// CUBLASResult is the output of one or more runs of the CUDA samples'
// matrixMulCUBLAS (11.x): `matrixMulCUBLAS -device=N -sizemult=10`, one
// after the other. Each run multiplies once for its check and 30 times
// for its timing, and compares the product with one the CPU computed.
type CUBLASResult struct {
	Runs []CUBLASRun
}

// CUBLASRun is one run on one GPU.
type CUBLASRun struct {
	Device           int    // the last "GPU Device N:" line; -1 when none was printed
	Name             string // the GPU's name as printed
	Line             int    // where the run starts
	GflopsPerSec     float64
	Ops              float64 // floating point operations of one multiplication
	Compared         string  // "PASS" or "FAIL": the product against the CPU's; "" when not reached
	Errors           int64   // "Total Errors = N" printed under a FAIL; 0 otherwise
	Error            string  // a "CUDA error at" line, where the run stopped
	MatrixA, MatrixB [2]int
}

// ParseCUBLAS parses matrixMulCUBLAS's output. A run that stopped before
// its result check wraps ErrIncomplete (ErrToolFailed after a "CUDA error
// at" line); the result holds every run either way.
func ParseCUBLAS(data []byte) (CUBLASResult, error) {
	var res CUBLASResult
	cur := func(n int) *CUBLASRun {
		if len(res.Runs) == 0 {
			res.Runs = append(res.Runs, CUBLASRun{Device: -1, Line: n})
		}
		return &res.Runs[len(res.Runs)-1]
	}
	for i, raw := range splitLines(data) {
		n, s := i+1, strings.TrimSpace(raw)
		switch {
		case mmStartRe.MatchString(s):
			res.Runs = append(res.Runs, CUBLASRun{Device: -1, Line: n})
		case mmDeviceRe.MatchString(s):
			m := mmDeviceRe.FindStringSubmatch(s)
			cur(n).Device, _ = strconv.Atoi(m[1])
			cur(n).Name = m[2]
		case mmSizeRe.MatchString(s):
			m := mmSizeRe.FindStringSubmatch(s)
			r := cur(n)
			r.MatrixA, r.MatrixB = [2]int{atoiOr0(m[1]), atoiOr0(m[2])}, [2]int{atoiOr0(m[3]), atoiOr0(m[4])}
		case mmPerfRe.MatchString(s):
			m := mmPerfRe.FindStringSubmatch(s)
			rate, err1 := parseRate(m[1])
			ops, err2 := parseRate(m[3])
			if err1 != nil || err2 != nil {
				return res, lineErr(toolCUBLAS, n, s, "expected GFlop/s and Ops as numbers")
			}
			cur(n).GflopsPerSec, cur(n).Ops = rate, ops
		case mmCompareRe.MatchString(s):
			cur(n).Compared = mmCompareRe.FindStringSubmatch(s)[1]
		case mmErrorsRe.MatchString(s):
			v, err := parseCount(mmErrorsRe.FindStringSubmatch(s)[1])
			if err != nil {
				return res, lineErr(toolCUBLAS, n, s, "expected an error count")
			}
			cur(n).Errors = v
		case cudaErrRe.MatchString(s) || strings.HasPrefix(s, "CUBLAS error") || strings.HasPrefix(s, "cublas error"):
			cur(n).Error = clip(s)
		}
	}
	return res, cublasComplete(res)
}

func cublasComplete(res CUBLASResult) error {
	if len(res.Runs) == 0 {
		return incomplete(toolCUBLAS, "no \"[Matrix Multiply CUBLAS] - Starting...\" run")
	}
	for _, r := range res.Runs {
		switch {
		case r.Compared != "":
		case r.Error != "":
			return &ParseError{Tool: toolCUBLAS, Line: r.Line, Msg: "run on GPU " + strconv.Itoa(r.Device) + ": " + r.Error, Err: ErrToolFailed}
		default:
			return &ParseError{Tool: toolCUBLAS, Line: r.Line, Msg: "run on GPU " + strconv.Itoa(r.Device) + " stopped before its result check", Err: ErrIncomplete}
		}
	}
	return nil
}
