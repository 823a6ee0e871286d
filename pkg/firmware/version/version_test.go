package version

import (
	"testing"
)

// TestCompare orders versions as vendors write them; the strings come from
// the shipped mockups (testdata/redfish-mockups) and the recipes.
func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
		ok   bool
	}{
		{"1.7.2", "1.7.2", 0, true},
		{"1.7.2", "1.8.0", -1, true},
		{"1.10", "1.9", 1, true},              // numbers, not text
		{"1.7", "1.7.0", 0, true},             // a missing field is 0
		{"1.7", "1.7.2", -1, true},            //
		{"2.72 Sep 04 2022", "2.72", 0, true}, // HPE iLO 5 FirmwareInventory appends the build date
		{"iLO 5 v2.72", "2.72", 0, true},      // the Manager's FirmwareVersion names the product
		{"iLO 5 v2.72", "2.78 Sep 04 2023", -1, true},
		{"P79 v1.45 (12/06/2017)", "P79 v1.45", 0, true}, // DMTF mockup BIOS
		{"A48 v2.80 (01/19/2023)", "A48 v2.82", -1, true},
		{"A48 v2.80 (01/19/2023)", "U46 v2.82", 0, false}, // another platform's ROM
		{"94.02.5C.00.03", "94.02.74.00.01", -1, true},    // NVIDIA VBIOS fields are hexadecimal: 5C < 74
		{"96.00.74.00.01", "96.00.5E.00.01", 1, true},
		{"1.45.455b66-rev4", "1.45.455b66-rev5", -1, true},
		{"1.45.455b66-rev4", "1.30.367a12-rev1", 1, true},
		{"2.4b", "2.4c", -1, true},
		{"1.0", "1.0-rc1", 1, true},
		{"v2022.01", "2022.01", 0, true},
		{"ex235n.bios-1.2.1", "ex235n.bios-1.3.0", -1, true},
		{"ex235n.bios-1.2.1", "ex425.bios-1.3.0", 0, false},
		{"undefined", "1.0", 0, false}, // HPE Cray ManagementEthernet
		{"", "1.0", 0, false},
		{"13.2.0 Build 45", "13.2.0 Build 46", -1, true},
		{"7.10.30.00", "7.10.30.00", 0, true},
		{"12.84.13", "12.84.9", 1, true},
		{"C27", "C28", -1, true}, // GIGABYTE/AMI BIOS
		{"ff", "fe", 0, false},   // GIGABYTE CPLD "ff": no order, only equality
	} {
		got, ok := Compare(tc.a, tc.b)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
		}
		if ok && tc.ok {
			if back, _ := Compare(tc.b, tc.a); back != -tc.want {
				t.Errorf("Compare(%q, %q) = %d: not the reverse of %d", tc.b, tc.a, back, got)
			}
		}
	}
}

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"2.72 Sep 04 2022", "2.72", true},
		{"iLO 5 v2.72", "2.72", true},
		{"ff", "FF", true}, // Gigabyte CPLD: no order, the same text
		{"ff", "fe", false},
		{"undefined", "undefined", true},
		{"1.7.2", "1.7.3", false},
		{"nc.1.6.19-5-shasta-release.arm.2022-02-25T01:38:09+00:00.d20b426", "nc.1.6.19-5-shasta-release.arm.2022-02-25T01:38:09+00:00.d20b426", true},
	} {
		if got := Equal(tc.a, tc.b); got != tc.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// FuzzCompare: any two strings compare without panicking, antisymmetric
// where ordered, and a version equals itself.
func FuzzCompare(f *testing.F) {
	for _, s := range []string{"1.7.2", "P79 v1.45 (12/06/2017)", "94.02.5C.00.03", "2.72 Sep 04 2022", "iLO 5 v2.72", "undefined", "1.0-rc1", "v"} {
		f.Add(s, "1.7")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		c, ok := Compare(a, b)
		d, ok2 := Compare(b, a)
		if ok != ok2 || ok && c != -d {
			t.Errorf("Compare(%q,%q)=%d,%v but reversed %d,%v", a, b, c, ok, d, ok2)
		}
		if Parse(a).Known() {
			if c, ok := Compare(a, a); !ok || c != 0 {
				t.Errorf("Compare(%q, itself) = %d, %v", a, c, ok)
			}
		}
	})
}
