package burnin

import "slices"

const toolDCGM = "dcgm"

// DCGMStatus is a test or entity result as dcgmi prints it.
type DCGMStatus string

// The statuses dcgmi prints. DCGM 3.x JSON folds Warn into Fail.
const (
	DCGMPass DCGMStatus = "Pass"
	DCGMFail DCGMStatus = "Fail"
	DCGMWarn DCGMStatus = "Warn"
	DCGMSkip DCGMStatus = "Skip"
)

// rank orders statuses by severity: Skip < Pass < Warn < Fail.
func (s DCGMStatus) rank() int {
	return slices.Index([]DCGMStatus{DCGMSkip, DCGMPass, DCGMWarn, DCGMFail}, s)
}

// DCGMResult is one dcgmi diag run.
type DCGMResult struct {
	Version       string // DCGM version
	DriverVersion string
	// GPUs is how many GPUs the run covered, from "GPU Device IDs" (DCGM 3)
	// or entity_groups (DCGM 4); 0 when the output does not say. A "Pass -
	// All" row of the table covers GPUs 0 to GPUs-1.
	GPUs  int        `json:",omitempty"`
	Tests []DCGMTest // in output order
}

// DCGMTest is one diagnostic ("PCIe", "Diagnostic"; DCGM 4 names them
// "pcie", "diagnostic").
type DCGMTest struct {
	Category string // "Deployment", "Integration", "Hardware", "Stress"
	Name     string
	// Status is the test's overall result: test_summary in DCGM 4, the worst
	// entity result in DCGM 3 and in the text table.
	Status   DCGMStatus
	Entities []DCGMEntityResult
	Warnings []DCGMWarning // not tied to an entity (DCGM 4 test_summary, text table)
}

// DCGMEntityResult is a test's result for one GPU (or CPU). System-wide
// results (DCGM 3 deployment tests) have Group "" and ID -1.
type DCGMEntityResult struct {
	Group    string // "GPU", "CPU", or ""
	ID       int
	Status   DCGMStatus
	Warnings []DCGMWarning
	Info     []string
}

// DCGMWarning is an error or warning dcgmi attached to a result. ErrorID is
// the DCGM_FR_* code; Category and Severity are DCGM's numeric classes.
type DCGMWarning struct {
	Message  string
	ErrorID  int
	Category int
	Severity int
}

// Passed reports whether no test or entity failed or warned and at least one
// test passed. Skips are allowed: DCGM skips what the hardware lacks.
func (r DCGMResult) Passed() bool {
	passed := false
	for _, t := range r.Tests {
		worst := t.Status
		for _, e := range t.Entities {
			if e.Status.rank() > worst.rank() {
				worst = e.Status
			}
		}
		if worst == DCGMFail || worst == DCGMWarn {
			return false
		}
		passed = passed || worst == DCGMPass
	}
	return passed
}

// FailedGPUs lists, sorted, the GPU IDs with a Fail or Warn in any test.
func (r DCGMResult) FailedGPUs() []int {
	var ids []int
	for _, t := range r.Tests {
		for _, e := range t.Entities {
			if e.Group == "GPU" && (e.Status == DCGMFail || e.Status == DCGMWarn) && !slices.Contains(ids, e.ID) {
				ids = append(ids, e.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}
