package blockdev

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

const gib = 1 << 30

func TestSelect(t *testing.T) {
	disks := []Disk{
		{Name: "nvme0n1", Path: "/dev/nvme0n1", Size: 3840 * 1e9, Model: "SAMSUNG MZQL23T8HCLS", Serial: "S1"},
		{Name: "nvme1n1", Path: "/dev/nvme1n1", Size: 480 * 1e9, Model: "Micron_7450_MTFDKBA480TFR", Serial: "M1"},
		{Name: "nvme2n1", Path: "/dev/nvme2n1", Size: 480 * 1e9, Model: "Micron_7450_MTFDKBA480TFR", Serial: "M2"},
		{Name: "sda", Path: "/dev/sda", Size: 8000 * 1e9, Model: "ST8000NM", Rotational: true},
		{Name: "sdb", Path: "/dev/sdb", Size: 32 * gib, Model: "USB Flash", Removable: true},
		{Name: "sdc", Path: "/dev/sdc", Size: 0, Model: "Virtual CD"},
	}
	tests := map[string]struct {
		spec recipe.DiskSpec
		want string // disk name, or "error: substring"
	}{
		"any: smallest, then name": {recipe.DiskSpec{Boot: true}, "nvme1n1"},
		"min size":                 {recipe.DiskSpec{MinSize: 1e12}, "nvme0n1"},
		"max size":                 {recipe.DiskSpec{MinSize: 100 * gib, MaxSize: 500e9}, "nvme1n1"},
		"model":                    {recipe.DiskSpec{Model: "samsung"}, "nvme0n1"},
		"serial":                   {recipe.DiskSpec{Serial: "M2"}, "nvme2n1"},
		"media hdd":                {recipe.DiskSpec{Media: "hdd"}, "sda"},
		"media ssd":                {recipe.DiskSpec{Media: "SSD"}, "error: media nvme is not ssd"},
		"path":                     {recipe.DiskSpec{Path: "/dev/sda"}, "sda"},
		"removable by path":        {recipe.DiskSpec{Path: "/dev/sdb"}, "sdb"},
		"removable not by default": {recipe.DiskSpec{MaxSize: 40 * gib}, "error: sdb: removable"},
		"empty medium":             {recipe.DiskSpec{Path: "/dev/sdc"}, "error: sdc: size 0"},
		"nothing fits":             {recipe.DiskSpec{MinSize: 20e12}, "error: no disk matches {min_size="},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := Select(disks, tc.spec)
			got := d.Name
			if err != nil {
				got = "error: " + err.Error()
			}
			if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Select = %q, want an error containing %q", got, want)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("Select = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := Select(nil, recipe.DiskSpec{}); err == nil || !strings.Contains(err.Error(), "no disks found") {
		t.Errorf("no disks: err = %v", err)
	}
}

func write(t *testing.T, root, name, content string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestListFakeTree(t *testing.T) {
	root := t.TempDir()
	write(t, root, "sys/block/nvme0n1/size", "7501476528\n")
	write(t, root, "sys/block/nvme0n1/queue/rotational", "0\n")
	write(t, root, "sys/block/nvme0n1/removable", "0\n")
	write(t, root, "sys/block/nvme0n1/device/model", "SAMSUNG MZQL23T8HCLS-00A07               \n")
	write(t, root, "sys/block/nvme0n1/device/serial", "  S64HNE0T123456\n")
	write(t, root, "sys/block/nvme0n1/device/state", "live\n")
	os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers/nvme"), 0o755)
	os.Symlink("../../../bus/pci/drivers/nvme", filepath.Join(root, "sys/block/nvme0n1/device/driver"))
	write(t, root, "sys/block/sda/size", "1000\n")
	write(t, root, "sys/block/sda/queue/rotational", "1\n")
	write(t, root, "sys/block/sda/device/model", "ST8000NM\n")
	write(t, root, "sys/block/sda/device/vpd_pg80", "\x00\x80\x00\x08ZA1B2C3D")
	write(t, root, "sys/block/vda/size", "2048\n")
	write(t, root, "sys/block/vda/serial", "lab-disk-1\n")
	write(t, root, "sys/block/loop0/size", "0\n")
	write(t, root, "sys/block/zram0/size", "100\n")
	got, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Disk{
		{Name: "nvme0n1", Path: "/dev/nvme0n1", Size: 7501476528 * 512, Model: "SAMSUNG MZQL23T8HCLS-00A07",
			Serial: "S64HNE0T123456", Driver: "nvme", State: "live"},
		{Name: "sda", Path: "/dev/sda", Size: 512000, Model: "ST8000NM", Serial: "ZA1B2C3D", Rotational: true},
		{Name: "vda", Path: "/dev/vda", Size: 2048 * 512, Serial: "lab-disk-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestListThisMachine(t *testing.T) {
	netnstest.NeedFiles(t, "sysfs", "/sys/block")
	disks, err := List("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range disks {
		if strings.HasPrefix(d.Name, "loop") || d.Path != "/dev/"+d.Name {
			t.Errorf("unexpected disk %+v", d)
		}
	}
	t.Logf("disks: %+v", disks)
}
