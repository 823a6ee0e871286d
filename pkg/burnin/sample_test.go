package burnin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseGPUSamples(t *testing.T) {
	tests := map[string]struct {
		in      []byte
		samples int
		first   GPUSample
		lost    []LostGPU
		err     *wantErr
	}{
		"pass: 8 GPUs, 3 rounds": {
			in: fixture(t, "samples/pass.txt"), samples: 24,
			first: GPUSample{Index: 0, PCIBusID: "00000000:18:00.0", TempCelsius: ptr(34.0), PowerWatts: ptr(69.87), ThrottleReasons: ptr(uint64(1))},
		},
		"fail: GPU 2 throttles, then is lost": {
			in: fixture(t, "samples/fail.txt"), samples: 23,
			first: GPUSample{Index: 0, PCIBusID: "00000000:18:00.0", TempCelsius: ptr(62.0), PowerWatts: ptr(690.11), ThrottleReasons: ptr(uint64(0))},
			lost:  []LostGPU{{PCIBusID: "0000:3A:00.0", Reason: "Unknown Error"}},
		},
		"truncated mid line": {in: fixture(t, "samples/truncated.txt"), err: &wantErr{is: ErrIncomplete, line: 24}},
		"not supported values": {
			in: []byte("3, 00000000:5D:00.0, [N/A], [Not Supported], [N/A]\n"), samples: 1,
			first: GPUSample{Index: 3, PCIBusID: "00000000:5D:00.0"},
		},
		"bad bitmask": {in: []byte("0, 00000000:18:00.0, 40, 70.1, 48\n"), err: &wantErr{line: 1, text: "expected 0x<hex>"}},
		// A line that does not start with a GPU index is not a sample: a header, a driver warning.
		"header and warning lines are skipped": {in: []byte("index, pci.bus_id, temperature.gpu, power.draw, clocks_throttle_reasons.active\n" +
			"WARNING: infoROM is corrupted at gpu 0000:3A:00.0\n3, 00000000:5D:00.0, 40, 70.1, 0x0\n"), samples: 1,
			first: GPUSample{Index: 3, PCIBusID: "00000000:5D:00.0", TempCelsius: ptr(40.0), PowerWatts: ptr(70.1), ThrottleReasons: ptr(uint64(0))}},
		"no devices":    {in: []byte("No devices were found\n"), err: &wantErr{is: ErrToolFailed, line: 1}},
		"wrong columns": {in: []byte("0, 00000000:18:00.0, 40\n"), err: &wantErr{line: 1, text: "expected 5 fields"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGPUSamples(tc.in)
			checkErr(t, toolNvidiaSMI, err, tc.err)
			if len(got.Samples) != tc.samples {
				t.Fatalf("%d samples, want %d", len(got.Samples), tc.samples)
			}
			if tc.samples > 0 {
				if d := cmp.Diff(tc.first, got.Samples[0]); d != "" {
					t.Errorf("first sample (-want +got):\n%s", d)
				}
			}
			if d := cmp.Diff(tc.lost, got.Lost); d != "" {
				t.Errorf("lost (-want +got):\n%s", d)
			}
		})
	}
	got, _ := ParseGPUSamples(fixture(t, "samples/fail.txt"))
	if by := got.ByGPU(); len(by) != 8 || len(by[2]) != 2 || len(by[0]) != 3 || *by[2][1].ThrottleReasons != 0x48 || by[2][1].PowerWatts != nil {
		t.Errorf("ByGPU = %+v", by)
	}
}

func TestParseXIDs(t *testing.T) {
	tests := map[string]struct {
		in   []byte
		want XIDLog
		err  *wantErr
	}{
		"pass: driver load, no Xid": {in: fixture(t, "xid/pass.txt")},
		"fail: DBE, contained ECC, fallen off the bus": {
			in: fixture(t, "xid/fail.txt"),
			want: XIDLog{Events: []XIDEvent{
				{Line: 2, PCI: "0000:3a:00", Code: 48, PID: 41877, Message: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."},
				{Line: 3, PCI: "0000:3a:00", Code: 94, PID: 41877, Message: "Contained: SM (0x1). RST: No, D-RST: No"},
				{Line: 4, PCI: "0000:5d:00", Code: 79, PID: -1, Message: "GPU has fallen off the bus."},
				{Line: 6, PCI: "0000:18:00", Code: 13, PID: -1, Message: "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address"},
			}},
		},
		"truncated mid line": {in: fixture(t, "xid/truncated.txt"), err: &wantErr{is: ErrIncomplete, line: 2}},
		"old driver without PCI: prefix": {
			in:   []byte("NVRM: Xid (0000:03:00): 31, Ch 00000010, engmask 00000101, intr 10000000\n"),
			want: XIDLog{Events: []XIDEvent{{Line: 1, PCI: "0000:03:00", Code: 31, PID: -1, Message: "Ch 00000010, engmask 00000101, intr 10000000"}}},
		},
		"MIG instance in the parenthesis": {
			in:   []byte("[ 88.1] NVRM: Xid (PCI:0000:07:00 GPU-I:07): 43, pid=991, name=python3, Ch 00000010\n"),
			want: XIDLog{Events: []XIDEvent{{Line: 1, PCI: "0000:07:00", Code: 43, PID: 991, Message: "Ch 00000010"}}},
		},
		"garbled": {in: []byte("ok\nNVRM: Xid (PCI:0000:18:00): seventy-nine\n"), err: &wantErr{line: 2, text: "expected"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseXIDs(tc.in)
			checkErr(t, toolXID, err, tc.err)
			if d := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(XIDEvent{}, "Raw")); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	samples, err := ParseGPUSamples(fixture(t, "samples/fail.txt"))
	if err != nil {
		t.Fatal(err)
	}
	xids, err := ParseXIDs(fixture(t, "xid/fail.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	s.AddSamples(samples)
	s.AddXIDs(xids)
	got := s.GPUs()
	if len(got) != 8 {
		t.Fatalf("%d GPUs, want 8: %+v", len(got), got)
	}
	want := map[int]GPUSummary{
		0: {PCI: "0000:18:00", Index: 0, Samples: 3, MaxTempCelsius: 70, MaxPowerWatts: 699.5, XIDs: 1, XIDCodes: []int{13}},
		2: {PCI: "0000:3a:00", Index: 2, Samples: 2, MaxTempCelsius: 87, MaxPowerWatts: 693.05, ThrottleReasons: 0x48, Lost: true, XIDs: 2, XIDCodes: []int{48, 94}},
		3: {PCI: "0000:5d:00", Index: 3, Samples: 3, MaxTempCelsius: 70, MaxPowerWatts: 699.5, XIDs: 1, XIDCodes: []int{79}},
		7: {PCI: "0000:db:00", Index: 7, Samples: 3, MaxTempCelsius: 70, MaxPowerWatts: 699.81},
	}
	for i, w := range want {
		if d := cmp.Diff(w, got[i]); d != "" {
			t.Errorf("GPU %d (-want +got):\n%s", i, d)
		}
	}
	// A Xid for a GPU no sample names still counts, first in order.
	s.AddXIDs(XIDLog{Events: []XIDEvent{{PCI: "0000:e1:00", Code: 79}}})
	if g := s.GPUs()[0]; g.Index != -1 || g.PCI != "0000:e1:00" || g.XIDs != 1 {
		t.Errorf("Xid-only GPU = %+v", g)
	}
	var empty Summary
	if len(empty.GPUs()) != 0 {
		t.Error("empty summary has GPUs")
	}
}

func TestNormalizePCI(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:3A:00.0": "0000:3a:00",
		"0000:3a:00":       "0000:3a:00",
		"0001:B7:00.1":     "0001:b7:00",
		"garbage":          "garbage",
	} {
		if got := NormalizePCI(in); got != want {
			t.Errorf("NormalizePCI(%q) = %q, want %q", in, got, want)
		}
	}
}
