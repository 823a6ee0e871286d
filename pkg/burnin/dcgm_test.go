package burnin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dcgmDeployment lists DCGM 3's deployment tests in output order.
func dcgmDeployment() []string {
	return []string{"Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
		"Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"}
}

func gpus(st DCGMStatus, ids ...int) []DCGMEntityResult {
	var out []DCGMEntityResult
	for _, id := range ids {
		out = append(out, DCGMEntityResult{Group: "GPU", ID: id, Status: st})
	}
	return out
}

// dcgmV3Pass is testdata/dcgm/pass_v3.json.
func dcgmV3Pass() DCGMResult {
	r := DCGMResult{Version: "3.3.5", DriverVersion: "535.161.08", GPUs: 2}
	for _, n := range dcgmDeployment() {
		r.Tests = append(r.Tests, DCGMTest{Category: "Deployment", Name: n, Status: DCGMPass,
			Entities: []DCGMEntityResult{{ID: -1, Status: DCGMPass}}})
	}
	pcie := gpus(DCGMPass, 0, 1)
	pcie[0].Info = []string{"GPU 0 GPU to Host bandwidth:\t\t25.31 GB/s"}
	pcie[1].Info = []string{"GPU 1 GPU to Host bandwidth:\t\t25.28 GB/s"}
	r.Tests = append(r.Tests,
		DCGMTest{Category: "Integration", Name: "PCIe", Status: DCGMPass, Entities: pcie},
		DCGMTest{Category: "Hardware", Name: "GPU Memory", Status: DCGMPass, Entities: gpus(DCGMPass, 0, 1)},
		DCGMTest{Category: "Hardware", Name: "Diagnostic", Status: DCGMPass, Entities: gpus(DCGMPass, 0, 1)},
		DCGMTest{Category: "Stress", Name: "Targeted Stress", Status: DCGMPass, Entities: gpus(DCGMPass, 0, 1)},
		DCGMTest{Category: "Stress", Name: "Targeted Power", Status: DCGMPass, Entities: gpus(DCGMPass, 0, 1)},
		DCGMTest{Category: "Stress", Name: "Memory Bandwidth", Status: DCGMPass, Entities: gpus(DCGMPass, 0, 1)})
	return r
}

// dcgmV4Pass is testdata/dcgm/pass_v4.json.
func dcgmV4Pass() DCGMResult {
	r := DCGMResult{Version: "4.1.1", DriverVersion: "550.127.08", GPUs: 4}
	add := func(cat, name string) *DCGMTest {
		r.Tests = append(r.Tests, DCGMTest{Category: cat, Name: name, Status: DCGMPass, Entities: gpus(DCGMPass, 0, 1, 2, 3)})
		return &r.Tests[len(r.Tests)-1]
	}
	add("Deployment", "software")
	add("Hardware", "memory")
	add("Hardware", "diagnostic")
	add("Integration", "pcie").Entities[0].Info = []string{"GPU to Host bandwidth: 55.21 GB/s", "Host to GPU bandwidth: 54.87 GB/s"}
	add("Stress", "targeted_stress")
	add("Stress", "targeted_power")
	add("Stress", "memory_bandwidth")
	return r
}

func TestParseDCGM(t *testing.T) {
	v3fail := dcgmV3Pass()
	v3fail.Tests[6] = DCGMTest{Category: "Deployment", Name: "Page Retirement/Row Remap", Status: DCGMFail, Entities: []DCGMEntityResult{{
		Group: "GPU", ID: 1, Status: DCGMFail, Warnings: []DCGMWarning{{ErrorID: 81, Category: 4, Severity: 2,
			Message: "GPU 1 had uncorrectable memory errors and row remapping failed. Run a field diagnostic on the GPU."}}}}}
	v3fail.Tests[10] = DCGMTest{Category: "Hardware", Name: "GPU Memory", Status: DCGMFail, Entities: []DCGMEntityResult{
		{Group: "GPU", ID: 0, Status: DCGMPass},
		{Group: "GPU", ID: 1, Status: DCGMFail, Warnings: []DCGMWarning{{ErrorID: 37, Category: 4, Severity: 2,
			Message: "A DBE occurred on GPU 1 during the memory test. Drain the GPU and reset it or reboot the node."}}}}}
	v3fail.Tests[11] = DCGMTest{Category: "Hardware", Name: "Diagnostic", Status: DCGMSkip, Entities: gpus(DCGMSkip, 0, 1)}

	v4fail := dcgmV4Pass()
	warn := DCGMWarning{ErrorID: 98, Category: 3, Severity: 2, Message: "GPU 2 clocks were throttled by power capping for 11.2 s of the 60 s test."}
	diag := &v4fail.Tests[2]
	diag.Status, diag.Warnings = DCGMWarn, []DCGMWarning{warn}
	diag.Entities = append(gpus(DCGMPass, 0, 1, 3), DCGMEntityResult{Group: "GPU", ID: 2, Status: DCGMWarn, Warnings: []DCGMWarning{warn}})

	tests := map[string]struct {
		in     []byte
		want   DCGMResult
		passed bool
		failed []int
		err    *wantErr
	}{
		"pass: DCGM 3.3 -r 3":                 {in: fixture(t, "dcgm/pass_v3.json"), want: dcgmV3Pass(), passed: true},
		"fail: DCGM 3.3, row remap and a DBE": {in: fixture(t, "dcgm/fail_v3.json"), want: v3fail, failed: []int{1}},
		"pass: DCGM 4.1 -r 3":                 {in: fixture(t, "dcgm/pass_v4.json"), want: dcgmV4Pass(), passed: true},
		"fail: DCGM 4.1, power warning":       {in: fixture(t, "dcgm/fail_v4.json"), want: v4fail, failed: []int{2}},
		"truncated JSON": {
			in:  fixture(t, "dcgm/truncated_v3.json"),
			err: &wantErr{is: ErrIncomplete, text: "JSON document ends early"},
		},
		"runtime_error": {
			in:  fixture(t, "dcgm/runtime_error.json"),
			err: &wantErr{is: ErrToolFailed, line: 3, text: "persistence mode is off"},
		},
		"unknown status": {
			in:  []byte("{\"DCGM Diagnostic\": {\"test_categories\": [{\"category\": \"Hardware\", \"tests\": [\n{\"name\": \"memory\", \"results\": [{\"status\": \"Maybe\"}]}]}]}}"),
			err: &wantErr{line: 2, text: `status "Maybe": expected Pass, Fail, Warn or Skip`},
		},
		"type error names its line": {
			in:  []byte("{\"DCGM Diagnostic\": {\n\"test_categories\": 7}}"),
			err: &wantErr{line: 2, text: "expected []burnin.dcgmCategory"},
		},
		"iterations rejected": {
			in:  []byte("{\n\"iterations\": [], \"Overall Result\": \"Pass\"}"),
			err: &wantErr{line: 2, text: "without --iterations"},
		},
		"no categories":   {in: []byte(`{"DCGM Diagnostic": {}}`), err: &wantErr{is: ErrIncomplete}},
		"not DCGM output": {in: []byte(`{"jobs": []}`), err: &wantErr{line: 1, text: "DCGM Diagnostic"}},
		// Written from dcgmi's behaviour: stderr notices land before and after the document.
		"text before and after the document is skipped": {
			in:   append(append([]byte("Warning: the DCGM host engine is not running as root\n"), fixture(t, "dcgm/pass_v4.json")...), "\nnv-hostengine: connection reset\n"...),
			want: dcgmV4Pass(), passed: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDCGM(tc.in)
			checkErr(t, toolDCGM, err, tc.err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if got.Passed() != tc.passed {
				t.Errorf("Passed() = %v, want %v", got.Passed(), tc.passed)
			}
			if d := cmp.Diff(tc.failed, got.FailedGPUs()); d != "" {
				t.Errorf("FailedGPUs (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseDCGMText(t *testing.T) {
	pass := DCGMResult{Version: "3.3.5", DriverVersion: "535.161.08", GPUs: 4}
	for _, n := range dcgmDeployment() {
		pass.Tests = append(pass.Tests, DCGMTest{Category: "Deployment", Name: n, Status: DCGMPass})
	}
	for _, c := range [][2]string{{"Integration", "PCIe"}, {"Hardware", "GPU Memory"}, {"Hardware", "Diagnostic"},
		{"Stress", "Targeted Stress"}, {"Stress", "Targeted Power"}, {"Stress", "Memory Bandwidth"}} {
		// "Pass - All" is each of the 4 GPUs of "GPU Device IDs Detected".
		pass.Tests = append(pass.Tests, DCGMTest{Category: c[0], Name: c[1], Status: DCGMPass, Entities: gpus(DCGMPass, 0, 1, 2, 3)})
	}
	fail := dcgmCopy(pass)
	fail.Tests[10] = DCGMTest{Category: "Hardware", Name: "GPU Memory", Status: DCGMFail,
		Entities: append(gpus(DCGMPass, 0, 2, 3), gpus(DCGMFail, 1)...),
		Warnings: []DCGMWarning{{Message: "Detected 2 volatile double-bit ECC error(s) in GPU 1. Drain the GPU and reset it or reboot the node."}}}
	fail.Tests[11].Status, fail.Tests[11].Entities = DCGMSkip, gpus(DCGMSkip, 0, 1, 2, 3)
	fail.Tests[13] = DCGMTest{Category: "Stress", Name: "Targeted Power", Status: DCGMWarn, Entities: gpus(DCGMWarn, 3)}

	tests := map[string]struct {
		in     []byte
		want   DCGMResult
		passed bool
		err    *wantErr
	}{
		"pass: DCGM 3.3 table":           {in: fixture(t, "dcgm/pass_v3.txt"), want: pass, passed: true},
		"fail: DBE on GPU 1, power warn": {in: fixture(t, "dcgm/fail_v3.txt"), want: fail},
		"truncated table":                {in: fixture(t, "dcgm/truncated_v3.txt"), err: &wantErr{is: ErrIncomplete}},
		"tool error": {
			in:  []byte("Error: Unable to complete diagnostic for group 0. Return: (-1) Bad parameter.\n"),
			err: &wantErr{is: ErrToolFailed, text: "Unable to complete"},
		},
		"DCGM 4 entity rows": {
			in: []byte("+---+---+\n| Diagnostic | Result |\n+===+===+\n|-----  Metadata  ----------+---|\n| DCGM Version | 4.1.1 |\n" +
				"+-----  Hardware  ----------+---+\n| memory | Fail |\n|  | GPU0: Pass |\n|  | GPU1: Fail |\n" +
				"| Warning: GPU1 | A DBE occurred on GPU 1 during the memory test |\n+---------+----+\n"),
			want: DCGMResult{Version: "4.1.1", Tests: []DCGMTest{{Category: "Hardware", Name: "memory", Status: DCGMFail,
				Entities: []DCGMEntityResult{{Group: "GPU", ID: 0, Status: DCGMPass}, {Group: "GPU", ID: 1, Status: DCGMFail,
					Warnings: []DCGMWarning{{Message: "A DBE occurred on GPU 1 during the memory test"}}}}}}},
		},
		"bad status": {
			in:  []byte("| Diagnostic | Result |\n+-----  Hardware  ---+---+\n| memory | Perhaps |\n+----+\n"),
			err: &wantErr{line: 3, text: `"| memory | Perhaps |": expected Pass, Fail, Warn or Skip`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDCGMText(tc.in)
			checkErr(t, toolDCGM, err, tc.err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if got.Passed() != tc.passed {
				t.Errorf("Passed() = %v, want %v", got.Passed(), tc.passed)
			}
		})
	}
}

func dcgmCopy(r DCGMResult) DCGMResult {
	r.Tests = append([]DCGMTest(nil), r.Tests...)
	return r
}
