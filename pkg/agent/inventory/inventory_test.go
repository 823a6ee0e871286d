package inventory

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

func fakeSMI(path string) func(context.Context, ...string) ([]byte, error) {
	return func(context.Context, ...string) ([]byte, error) {
		if path == "" {
			return nil, exec.ErrNotFound
		}
		return os.ReadFile(path)
	}
}

// TestReadGolden reads testdata/gpu-node (made by testdata/mktree.py) and
// compares with testdata/gpu-node.golden.json; UPDATE_TESTDATA=1 rewrites it.
func TestReadGolden(t *testing.T) {
	root := filepath.Join("testdata", "gpu-node")
	inv := Read(context.Background(), Options{Root: root, NvidiaSMI: fakeSMI(filepath.Join(root, "nvidia-smi.csv")),
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	got, err := json.MarshalIndent(inv, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "gpu-node.golden.json")
	if os.Getenv("UPDATE_TESTDATA") != "" {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
		t.Errorf("inventory of %s (-golden +got):\n%s", root, diff)
	}
	// The facts the golden file must hold, so a wrong golden cannot pass silently.
	if len(inv.CPUs) != 2 || inv.CPUs[0].Cores != 2 || inv.CPUs[0].Threads != 4 || inv.CPUs[0].MaxMHz != 3800 {
		t.Errorf("cpus = %+v, want 2 sockets of 2 cores, 4 threads, 3800 MHz", inv.CPUs)
	}
	if len(inv.DIMMs) != 2 || inv.DIMMs[0].SizeMiB != 65536 || inv.DIMMs[0].Type != "DDR5" || inv.DIMMs[0].Slot != "P0 DIMMA1" {
		t.Errorf("dimms = %+v, want two 64 GiB DDR5", inv.DIMMs)
	}
	if len(inv.GPUs) != 2 || inv.GPUs[1].LinkCurrent != (machine.PCIeLink{Gen: 5, Width: 8}) || inv.GPUs[0].Slot != "11" ||
		inv.GPUs[0].VRAMMiB != 81559 || inv.GPUs[0].Serial != "1650123456789" {
		t.Errorf("gpus = %+v, want two H100s, the second at x8", inv.GPUs)
	}
	if len(inv.NICs) != 1 || inv.NICs[0].SpeedMbps != 400000 || inv.NICs[0].Model != "ConnectX-7" || !inv.NICs[0].LinkUp {
		t.Errorf("nics = %+v, want one ConnectX-7 up at 400G", inv.NICs)
	}
	if len(inv.Disks) != 1 || inv.Disks[0].Media != "NVMe" || inv.Disks[0].SizeBytes != 937703088*512 {
		t.Errorf("disks = %+v", inv.Disks)
	}
	if len(inv.Problems) != 0 {
		t.Errorf("problems = %+v", inv.Problems)
	}
}

func TestMemoryFallback(t *testing.T) {
	root := t.TempDir()
	must := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must("proc/meminfo", "MemTotal:        2040000 kB\n")
	dimms, err := readDIMMs(root)
	if err != nil || len(dimms) != 1 || dimms[0].SizeMiB != 1992 {
		t.Fatalf("meminfo fallback: %+v, %v; want one 1992 MiB entry", dimms, err)
	}
	must("sys/devices/system/memory/block_size_bytes", "8000000\n")
	must("sys/devices/system/memory/memory0/online", "1\n")
	must("sys/devices/system/memory/memory1/online", "1\n")
	must("sys/devices/system/memory/memory2/online", "0\n")
	dimms, err = readDIMMs(root)
	if err != nil || len(dimms) != 1 || dimms[0].SizeMiB != 256 || dimms[0].Slot != "system" {
		t.Fatalf("memory blocks: %+v, %v; want one 256 MiB entry", dimms, err)
	}
}

// TestReadThisMachine reads the real /sys and /proc of the machine running
// the test.
func TestReadThisMachine(t *testing.T) {
	netnstest.NeedFiles(t, "procfs", "/proc/cpuinfo")
	inv := Read(context.Background(), Options{})
	if len(inv.CPUs) == 0 || inv.CPUs[0].Threads == 0 {
		t.Errorf("no CPUs: %+v (problems %+v)", inv.CPUs, inv.Problems)
	}
	var mib int64
	for _, d := range inv.DIMMs {
		mib += d.SizeMiB
	}
	if mib < 256 {
		t.Errorf("memory %d MiB from %+v, want some (problems %+v)", mib, inv.DIMMs, inv.Problems)
	}
	b, _ := json.Marshal(inv)
	t.Logf("inventory: %s", b)
}

func TestParseNvidiaSMI(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []machine.GPU
		bad  bool
	}{
		"two": {
			in: "00000000:17:00.0, NVIDIA H100 80GB HBM3, 1650123456789, 81559, 96.00.99.00.01, 5, 5, 16, 16\n" +
				"00000000:3D:00.0, NVIDIA H100 80GB HBM3, 1650123456790, 81559, 96.00.99.00.01, 1, 5, 16, 16\n",
			want: []machine.GPU{
				{Vendor: "NVIDIA", PCIAddress: "0000:17:00.0", Model: "NVIDIA H100 80GB HBM3", Serial: "1650123456789", VRAMMiB: 81559,
					Firmware: "96.00.99.00.01", LinkCurrent: machine.PCIeLink{Gen: 5, Width: 16}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16}},
				{Vendor: "NVIDIA", PCIAddress: "0000:3d:00.0", Model: "NVIDIA H100 80GB HBM3", Serial: "1650123456790", VRAMMiB: 81559,
					Firmware: "96.00.99.00.01", LinkCurrent: machine.PCIeLink{Gen: 1, Width: 16}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16}},
			},
		},
		"not supported fields": {
			in: "00000000:01:00.0, NVIDIA GeForce RTX 4090, [N/A], 24564, 95.02.18.80.5F, [Not Supported], 4, 16, 16\n",
			want: []machine.GPU{{Vendor: "NVIDIA", PCIAddress: "0000:01:00.0", Model: "NVIDIA GeForce RTX 4090", VRAMMiB: 24564,
				Firmware: "95.02.18.80.5F", LinkCurrent: machine.PCIeLink{Width: 16}, LinkMax: machine.PCIeLink{Gen: 4, Width: 16}}},
		},
		"empty":          {in: "", want: nil},
		"missing fields": {in: "00000000:17:00.0, NVIDIA H100\n", bad: true},
		"driver error":   {in: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNvidiaSMI([]byte(tc.in))
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, bad = %v", err, tc.bad)
			}
			if diff := cmp.Diff(tc.want, got); !tc.bad && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPCIeGen(t *testing.T) {
	for in, want := range map[string]int{"2.5 GT/s PCIe": 1, "5.0 GT/s PCIe": 2, "8.0 GT/s PCIe": 3, "8 GT/s": 3,
		"16.0 GT/s PCIe": 4, "32.0 GT/s PCIe": 5, "64.0 GT/s PCIe": 6, "Unknown": 0, "": 0, "3 GT/s": 0} {
		if got := PCIeGen(in); got != want {
			t.Errorf("PCIeGen(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestParseCPUInfoNoPhysicalID(t *testing.T) {
	// Some VMs and arm64 omit physical id and model name.
	got := ParseCPUInfo([]byte("processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n"))
	want := []machine.CPU{{Socket: "CPU0", Cores: 1, Threads: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParseSMBIOSMemory(f *testing.F) {
	if b, err := os.ReadFile("testdata/gpu-node/sys/firmware/dmi/tables/DMI"); err == nil {
		f.Add(b)
	}
	f.Add([]byte{17, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		dimms, _ := ParseSMBIOSMemory(b)
		for _, d := range dimms {
			if d.SizeMiB <= 0 {
				t.Fatalf("dimm with size %d", d.SizeMiB)
			}
		}
	})
}

func FuzzParseNvidiaSMI(f *testing.F) {
	f.Add([]byte("00000000:17:00.0, NVIDIA H100 80GB HBM3, 1650123456789, 81559, 96.00.99.00.01, 5, 5, 16, 16\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseNvidiaSMI(b)
		ParseCPUInfo(b)
		ParseMemTotal(b)
	})
}

// Read asks LLDP about the NICs with link only, records what was heard and
// marks the boot interface.
func TestReadLLDPAndBoot(t *testing.T) {
	root := filepath.Join("testdata", "gpu-node")
	var asked []string
	sw := machine.LLDPNeighbor{ChassisID: "28:99:3a:4d:12:00", PortID: "Ethernet12/1", SystemName: "leaf-r12-a", VLAN: 100}
	inv := Read(context.Background(), Options{Root: root, NvidiaSMI: fakeSMI(""), BootIface: "ens1np0",
		LLDP: func(_ context.Context, ifaces []string) map[string]machine.LLDPNeighbor {
			asked = ifaces
			return map[string]machine.LLDPNeighbor{"ens1np0": sw, "br0": {PortID: "not a NIC"}}
		}})
	if diff := cmp.Diff([]string{"ens1np0"}, asked); diff != "" {
		t.Errorf("LLDP asked about (-want +got):\n%s", diff)
	}
	if len(inv.NICs) != 1 || !inv.NICs[0].Boot || inv.NICs[0].LLDP == nil || *inv.NICs[0].LLDP != sw {
		t.Errorf("nics = %+v, want ens1np0 the boot port, cabled to %+v", inv.NICs, sw)
	}
	// Without an answer the NIC has no neighbour; another boot port marks none.
	inv = Read(context.Background(), Options{Root: root, NvidiaSMI: fakeSMI(""), BootIface: "eth9",
		LLDP: func(context.Context, []string) map[string]machine.LLDPNeighbor { return nil }})
	if len(inv.NICs) != 1 || inv.NICs[0].Boot || inv.NICs[0].LLDP != nil {
		t.Errorf("nics = %+v, want no boot port and no neighbour", inv.NICs)
	}
}

func TestBootIface(t *testing.T) {
	if got, err := BootIface("http://127.0.0.1:8080"); err != nil || got != "lo" {
		t.Errorf("BootIface(loopback) = %q, %v; want lo", got, err)
	}
	for _, bad := range []string{"", "10.77.0.1:8080", "http://"} {
		if got, err := BootIface(bad); err == nil {
			t.Errorf("BootIface(%q) = %q, want an error", bad, got)
		}
	}
}
