package main

import (
	"fmt"
	"testing"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// The Debian-only GPU class (recipes/gpu-infer-l40sx4-debian.yaml) in
// TestGPUReady: a 4x L40S PCIe server whose installed debian-12-nvidia
// runs the burn-in built from Debian's archive (the CUDA samples
// bandwidthTest, p2pBandwidthLatencyTest and matrixMulCUBLAS, clpeak on
// NVIDIA's OpenCL ICD). Outputs in cmd/ingot/testdata/l40s (see its
// README: written in each tool's shape, not captured).

// l40sPlatform is Supermicro's AS-4125GS-TNRT: 2 EPYC 9354, 4 L40S.
var l40sPlatform = platform{sysModel: "AS-4125GS-TNRT", cpuVendor: "AMD", cpuMaker: "Advanced Micro Devices, Inc.",
	cpuModel: "AMD EPYC 9354 32-Core Processor", cores: 32, threads: 64, mhz: 3800,
	gpuModel: "NVIDIA L40S", gpuMem: "GDDR6", vramMiB: 46068, gpuMaxGen: 4,
	dimmMiB: 32768, psuModel: "PWS-2K41F-1R", psuWatts: 2400}

// defaultL40S is a healthy node of gpu-infer-l40sx4-debian, number i.
func defaultL40S(i int) hgxSpec {
	s := hgxSpec{hw: l40sPlatform, index: i,
		serial: fmt.Sprintf("S4125G%04d", i), uuid: fmt.Sprintf("6b1f0c3e-5a2d-4c8e-b7f4-%012x", i),
		bios: "2.1", bmc: "1.04.12", dimms: 24, psus: 4, bootModes: []string{"Legacy", "UEFI"}, inbandPSUs: true,
		biosAttrs: map[string]any{
			"SriovGlobalEnable": "Disabled", "ProcVirtualization": "Disabled", "MmioAbove4Gb": "Disabled",
			"ProcessorHyperThreadingDisable": true, "SysProfile": "PerfPerWattOptimizedOs", "PcieAspmL1": "Enabled",
			"NumLock": "On", "BootSeqRetry": "Disabled", "ProcCStates": "Disabled", "NumaNodesPerSocket": 4,
		},
	}
	for g, bus := range []string{"01", "41", "81", "c1"} {
		s.gpus = append(s.gpus, hgxGPU{slot: fmt.Sprintf("PCIE%d", g+1), serial: fmt.Sprintf("13240%04d%04d", i, g),
			bus: "0000:" + bus + ":00.0", firmware: "95.02.66.00.02", gen: 4, width: 16})
	}
	s.nics = append(s.nics, hgxNIC{name: "eno1np0", model: "ConnectX-6 Lx", mac: fmt.Sprintf("52:54:02:%02x:00:00", i),
		mbps: 25000, boot: true, vlan: 120})
	for p := 1; p <= 2; p++ {
		s.nics = append(s.nics, hgxNIC{name: fmt.Sprintf("ens%dnp0", p), model: "ConnectX-6 Dx", mac: fmt.Sprintf("52:54:02:%02x:00:%02x", i, p),
			mbps: 100000, vlan: 220})
	}
	s.disks = append(s.disks, machine.Disk{Name: "/dev/nvme0n1", Model: "Micron_7450_MTFDKBA960TFR", Serial: fmt.Sprintf("M7451%04d", i),
		SizeBytes: 960_197_124_096, Media: "NVMe", Health: "OK"})
	return s
}

// l40sOS is the installed debian-12-nvidia of a healthy node: Debian's
// 535 driver (base-gpu's pins) and the Debian-only burn-in tools.
func l40sOS() hgxOS {
	return hgxOS{
		software: machine.Software{Kernel: "6.1.0-57-amd64", OSRelease: "Debian GNU/Linux 12 (bookworm)",
			Drivers: map[string]string{"nvidia": "535.309.01", "cuda-driver": "12.2"}},
		tools: map[string]string{
			"bandwidthTest":           "testdata/l40s/bandwidthtest-gpu%d.txt",
			"matrixMulCUBLAS":         "testdata/l40s/cublas-gpu%d.txt",
			"p2pBandwidthLatencyTest": "testdata/l40s/p2p.txt",
			"clpeak":                  "testdata/l40s/clpeak.txt",
			"nvidia-smi":              "testdata/l40s/samples.txt",
			"dmesg":                   "../../pkg/burnin/testdata/xid/pass.txt",
		},
		missing: map[string]bool{},
		oneRun:  true,
	}
}

// l40sCase is a TestGPUReady case on the Debian-only class; os changes
// the healthy node's installed system.
func l40sCase(want machine.State, os func(*hgxOS), reason ...string) gpuReadyCase {
	return gpuReadyCase{recipe: "gpu-infer-l40sx4-debian", want: want, reason: reason,
		node: func(s *hgxSpec) { *s = defaultL40S(s.index) },
		os: func(o *hgxOS) {
			*o = l40sOS()
			if os != nil {
				os(o)
			}
		}}
}

// l40sHealthy: every check of the class ran, on the node's tools, and
// passed with the numbers of its outputs.
func l40sHealthy(t *testing.T, _ *hgxLab, n *hgxNode, j *store.Job) {
	t.Helper()
	st, err := engine.Status(j)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.CheckResult{}
	for _, r := range append(st.Checks, st.BurnIn...) {
		got[r.Name] = r
	}
	for name, min := range map[string]float64{
		"gpu-count": 4, "cublas-gemm": 35e12, "cuda-bandwidth": 26e9, "cuda-p2p": 25e9, "clpeak": 82e12,
	} {
		r, ok := got[name]
		if !ok || r.Verdict != api.VerdictPassed || r.Value < min {
			t.Errorf("%s: %+v; want passed with at least %g", name, r, min)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, want := range []string{"bandwidthTest --device=3 --memory=pinned", "matrixMulCUBLAS -device=3 -sizemult=10", "p2pBandwidthLatencyTest", "clpeak --compute-sp"} {
		if !containsString(n.calls, want) {
			t.Errorf("the burn-in did not run %q: %v", want, n.calls)
		}
	}
}

func containsString(xs []string, want string) bool {
	for _, x := range xs {
		if x == want {
			return true
		}
	}
	return false
}

func withCheck(c gpuReadyCase, check func(*testing.T, *hgxLab, *hgxNode, *store.Job)) gpuReadyCase {
	c.check = check
	return c
}

// verdictIs checks the verdict kind the server kept for burn-in check
// name: failed (the hardware's fault) or could-not-run (the tool's).
func verdictIs(name string, want api.Verdict) func(*testing.T, *hgxLab, *hgxNode, *store.Job) {
	return func(t *testing.T, _ *hgxLab, _ *hgxNode, j *store.Job) {
		t.Helper()
		st, err := engine.Status(j)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range st.BurnIn {
			if r.Name == name {
				if r.Verdict != want {
					t.Errorf("%s: verdict %q (%s), want %q", name, r.Verdict, r.Detail, want)
				}
				return
			}
		}
		t.Errorf("no burn-in result for %s in %+v", name, st.BurnIn)
	}
}
