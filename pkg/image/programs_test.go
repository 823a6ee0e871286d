package image

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

func TestProgramFiles(t *testing.T) {
	netnstest.NeedPrograms(t, "iperf3")
	path, err := exec.LookPath("iperf3")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ProgramFiles("iperf3")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, path) {
		t.Errorf("files %v lack the program %s", files, path)
	}
	want := map[string]bool{"ld-linux-x86-64.so.2": false, "libiperf.so.0": false, "libc.so.6": false}
	for _, f := range files {
		if _, ok := want[filepath.Base(f)]; ok {
			want[filepath.Base(f)] = true
		}
	}
	for lib, ok := range want {
		if !ok {
			t.Errorf("files %v lack %s", files, lib)
		}
	}
}

func TestProgramFilesErrors(t *testing.T) {
	for name, prog := range map[string]string{
		"not on PATH": "ingot-no-such-program",
		"not ELF":     "/etc/os-release",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ProgramFiles(prog)
			if err == nil || !strings.Contains(err.Error(), prog) {
				t.Errorf("ProgramFiles(%q) = %v: expected an error naming it", prog, err)
			}
		})
	}
}
