package firstboot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// fakeRun answers programs from testdata/tools fixtures; a program it
// does not know is missing; "hang" blocks until ctx ends.
func fakeRun(t *testing.T, tools map[string]string) Runner {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		fixture, ok := tools[name]
		switch {
		case !ok:
			return nil, &os.PathError{Op: "exec", Path: name, Err: os.ErrNotExist}
		case fixture == "hang":
			<-ctx.Done()
			return nil, ctx.Err()
		case fixture == "fail":
			return []byte("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"), errors.New("exit status 9")
		}
		if _, has := ctx.Deadline(); !has {
			t.Errorf("%s run without a deadline", name)
		}
		return os.ReadFile(filepath.Join("testdata/tools", fixture))
	}
}

func TestCollectDrivers(t *testing.T) {
	debian := "Debian GNU/Linux 12 (bookworm)"
	allTools := map[string]string{"nvidia-smi": "nvidia-smi.txt", "nv-fabricmanager": "nv-fabricmanager.txt",
		"ofed_info": "ofed_info.txt", "/usr/local/cuda/bin/nvcc": "nvcc.txt"}
	for name, tc := range map[string]struct {
		root  string
		tools map[string]string // nil: no Runner
		want  machine.Software
	}{
		"h100 with every tool": {"h100", allTools, machine.Software{Kernel: "6.1.0-40-amd64", OSRelease: debian,
			Drivers: map[string]string{"nvidia": "535.309.01", "cuda-driver": "12.2", "cuda-toolkit": "12.2.140",
				"nvidia-fabricmanager": "535.309.01", "ofed": "23.10-2.1.3.1"}}},
		"h100 files only": {"h100", nil, machine.Software{Kernel: "6.1.0-40-amd64", OSRelease: debian,
			Drivers: map[string]string{"nvidia": "535.309.01", "cuda-toolkit": "12.2.140", "ofed": "23.10-2.1.3"}}},
		"absent tools are not reported": {"h100", map[string]string{}, machine.Software{Kernel: "6.1.0-40-amd64", OSRelease: debian,
			Drivers: map[string]string{"nvidia": "535.309.01", "cuda-toolkit": "12.2.140", "ofed": "23.10-2.1.3"}}},
		"failing and hanging tools": {"h100", map[string]string{"nvidia-smi": "fail", "nv-fabricmanager": "hang", "ofed_info": "ofed_info-doca.txt"},
			machine.Software{Kernel: "6.1.0-40-amd64", OSRelease: debian,
				Drivers: map[string]string{"nvidia": "535.309.01", "cuda-toolkit": "12.2.140", "ofed": "24.10-1.1.4"}}},
		"proc and an old toolkit": {"proc-only", map[string]string{"/usr/local/cuda/bin/nvcc": "nvcc.txt"},
			machine.Software{Kernel: "6.1.0-40-amd64", OSRelease: "Debian GNU/Linux 12",
				Drivers: map[string]string{"nvidia": "535.309.01", "cuda-toolkit": "11.0.228"}}},
		"amd": {"mi300", map[string]string{"ofed_info": "ofed_info.txt"}, machine.Software{Kernel: "6.8.0-45-generic",
			OSRelease: "Ubuntu 24.04.1 LTS", Drivers: map[string]string{"amdgpu": "6.8.5", "ofed": "23.10-2.1.3.1"}}},
	} {
		t.Run(name, func(t *testing.T) {
			c := Collector{Root: filepath.Join("testdata/roots", tc.root), Timeout: 50 * time.Millisecond}
			if tc.tools != nil {
				c.Run = fakeRun(t, tc.tools)
			}
			got, err := c.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Collect(t.TempDir()); err == nil {
		t.Errorf("no kernel release: no error")
	}
}

// TestSourcesCoverDriverKeys: first boot can report every driver a recipe
// may pin, and nothing else.
func TestSourcesCoverDriverKeys(t *testing.T) {
	var keys []string
	for _, s := range driverSources() {
		keys = append(keys, s.key)
	}
	if diff := cmp.Diff(recipe.DriverKeys(), keys); diff != "" {
		t.Errorf("driver sources differ from recipe.DriverKeys (-recipe +sources):\n%s", diff)
	}
}

func TestParsers(t *testing.T) {
	fixture := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata/tools", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		parse func([]byte) string
		in    []byte
		want  string
	}{
		{"nvidia-smi header", CUDADriverVersion, fixture("nvidia-smi.txt"), "12.2"},
		{"nvidia-smi 570", CUDADriverVersion, []byte("| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: 12.8 |"), "12.8"},
		{"nvidia-smi failed", CUDADriverVersion, []byte("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."), ""},
		{"version.json", CUDAToolkitVersion, []byte(`{"cuda":{"name":"CUDA SDK","version":"12.2.140"}}`), "12.2.140"},
		{"version.json without cuda", CUDAToolkitVersion, []byte(`{"nvcc":{"version":"12.2.140"}}`), ""},
		{"version.txt", CUDAToolkitVersion, []byte("CUDA Version 11.0.228\n"), "11.0.228"},
		{"nvcc", CUDAToolkitVersion, fixture("nvcc.txt"), "12.2.140"},
		{"fabric manager", FabricManagerVersion, fixture("nv-fabricmanager.txt"), "535.309.01"},
		{"fabric manager garbage", FabricManagerVersion, []byte("Fabric Manager version is : \x00\x01"), ""},
		{"ofed", OFEDVersion, fixture("ofed_info.txt"), "23.10-2.1.3.1"},
		{"doca ofed", OFEDVersion, fixture("ofed_info-doca.txt"), "24.10-1.1.4"},
		{"ofed_info without -s", OFEDVersion, []byte("MLNX_OFED_LINUX-23.10-2.1.3.1 (OFED-23.10-2.1.3):\n\nofed-scripts:\n"), ""},
		{"proc nvidia", NvidiaVersion, []byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Tue Oct  7 2025\n"), "535.309.01"},
		{"proc nvidia open", NvidiaVersion, []byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"), ""},
		{"module version", trimmed, []byte("535.309.01\n"), "535.309.01"},
		{"module version junk", trimmed, []byte("not a version\n"), ""},
	} {
		if got := tc.parse(tc.in); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestExecRunner(t *testing.T) {
	if _, err := Exec(context.Background(), "/nonexistent/ingot-no-such-tool"); err == nil {
		t.Error("a missing program ran")
	}
	sh := "/bin/sh"
	netnstest.NeedFiles(t, "a POSIX shell", sh)
	out, err := Exec(context.Background(), sh, "-c", "echo 'CUDA Version: 12.2'")
	if err != nil || CUDADriverVersion(out) != "12.2" {
		t.Errorf("Exec: %q %v", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Exec(ctx, sh, "-c", "sleep 10"); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("a hanging program: %v after %s", err, time.Since(start))
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
	for k := range s.Drivers {
		if !slices.Contains(recipe.DriverKeys(), k) {
			t.Errorf("reported driver %q is not a recipe driver key", k)
		}
	}
}

// FuzzParsers: the parsers of tools' output never panic and return a
// version or nothing. Seeds: testdata/tools and testdata/fuzz/FuzzParsers.
func FuzzParsers(f *testing.F) {
	ents, _ := os.ReadDir("testdata/tools")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("testdata/tools", e.Name())); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range []func([]byte) string{NvidiaVersion, CUDADriverVersion, CUDAToolkitVersion, FabricManagerVersion, OFEDVersion, trimmed} {
			if v := p(b); v != "" && (version(v) != v || strings.ContainsAny(v, " \n\t:")) {
				t.Fatalf("parsed %q from %q", v, b)
			}
		}
	})
}

func TestCloudInitAndHostname(t *testing.T) {
	root := t.TempDir()
	for p, body := range map[string]string{
		"proc/sys/kernel/osrelease":  "6.1.0-40-amd64\n",
		"proc/sys/kernel/hostname":   "h100-r12-03\n",
		"run/cloud-init/result.json": `{"v1": {"datasource": "DataSourceNoCloud [seed=/var/lib/cloud/seed/nocloud]", "errors": []}}`,
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(body), 0o644)
	}
	s, err := Collector{Root: root}.Collect(context.Background())
	if err != nil || s.Hostname != "h100-r12-03" || s.CloudInit != "done" {
		t.Fatalf("Collect: %+v, %v", s, err)
	}
	for in, want := range map[string]string{
		`{"v1": {"errors": ["('scripts_user', RuntimeError('runparts: 1 failures'))"]}}`: "error: ('scripts_user', RuntimeError('runparts: 1 failures'))",
		`{"v1": `: "error: run/cloud-init/result.json: unexpected end of JSON input",
	} {
		if got := CloudInitResult([]byte(in)); got != want {
			t.Errorf("CloudInitResult(%s) = %q, want %q", in, got, want)
		}
	}
}
