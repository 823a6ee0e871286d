package firstboot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ingot-dev/ingot/pkg/machine"
)

func TestCollect(t *testing.T) {
	root := t.TempDir()
	w := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(s), 0o644)
	}
	w("proc/sys/kernel/osrelease", "6.1.0-40-amd64\n")
	w("etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n")
	w("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Tue Oct  7 00:00:00 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
	w("sys/module/mlx5_core/version", "24.10-1.1.4\n")
	got, err := Collect(root)
	if err != nil {
		t.Fatal(err)
	}
	want := machine.Software{Kernel: "6.1.0-40-amd64", OSRelease: "Debian GNU/Linux 12 (bookworm)",
		Drivers: map[string]string{"nvidia": "535.309.01", "ofed": "24.10-1.1.4"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := Collect(t.TempDir()); err == nil {
		t.Errorf("no kernel release: no error")
	}
}

func TestOSRelease(t *testing.T) {
	for in, want := range map[string]string{
		"NAME=Alpine\nVERSION_ID=3.20\n": "Alpine 3.20",
		"PRETTY_NAME='Ubuntu 24.04'\n":   "Ubuntu 24.04",
		"":                               "",
	} {
		if got := OSRelease([]byte(in)); got != want {
			t.Errorf("OSRelease(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestThisMachine(t *testing.T) {
	s, err := Collect("/")
	if err != nil || s.Kernel == "" {
		t.Fatalf("%+v %v", s, err)
	}
}
