package firstboot

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Runner runs a program and returns its standard output. It must give up
// when ctx ends. Exec is the real one; tests replace it.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// Exec runs a program of this system, found in PATH or by absolute path.
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second // a child holding stdout must not outlive ctx
	return cmd.Output()
}

// read is one place a driver version may be found: a file under the root,
// or a program's output; parse turns its bytes into the version ("" when
// it holds none).
type read struct {
	file  string
	prog  string
	args  []string
	parse func([]byte) string
}

// source is where one recipe driver key is read from, in order.
type source struct {
	key   string // a key of recipe.DriverKeys
	reads []read
}

// driverSources lists, for every key of recipe.DriverKeys, where its
// version comes from (a test checks the two lists agree).
func driverSources() []source {
	return []source{
		{"nvidia", []read{
			{file: "sys/module/nvidia/version", parse: trimmed},
			{file: "proc/driver/nvidia/version", parse: NvidiaVersion},
		}},
		{"cuda-driver", []read{{prog: "nvidia-smi", parse: CUDADriverVersion}}},
		{"cuda-toolkit", []read{
			{file: "usr/local/cuda/version.json", parse: CUDAToolkitVersion},
			{file: "usr/local/cuda/version.txt", parse: CUDAToolkitVersion},
			{prog: "/usr/local/cuda/bin/nvcc", args: []string{"--version"}, parse: CUDAToolkitVersion},
		}},
		{"nvidia-fabricmanager", []read{{prog: "nv-fabricmanager", args: []string{"--version"}, parse: FabricManagerVersion}}},
		{"ofed", []read{
			{prog: "ofed_info", args: []string{"-s"}, parse: OFEDVersion},
			{file: "sys/module/mlx5_core/version", parse: trimmed},
		}},
		{"amdgpu", []read{{file: "sys/module/amdgpu/version", parse: trimmed}}},
	}
}

// versionRE is what a version looks like in tools' output: 535.309.01,
// 12.2, 23.10-2.1.3.1.
var versionRE = regexp.MustCompile(`^[0-9][0-9A-Za-z.+~_-]*$`)

// version returns s trimmed if it looks like a version, else "".
func version(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 64 || !versionRE.MatchString(s) {
		return ""
	}
	return s
}

func trimmed(b []byte) string { return version(string(b)) }

// NvidiaVersion reads the version from /proc/driver/nvidia/version:
// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Tue ...".
func NvidiaVersion(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "NVRM version:") {
			continue
		}
		f := strings.Fields(l)
		for i, w := range f {
			if w == "Module" && i+1 < len(f) {
				return version(f[i+1])
			}
		}
	}
	return ""
}

var cudaDriverRE = regexp.MustCompile(`CUDA Version:\s*([0-9]+(\.[0-9]+)*)`)

// CUDADriverVersion reads the CUDA version the driver supports from
// nvidia-smi's header: "| NVIDIA-SMI 535.309.01  Driver Version:
// 535.309.01  CUDA Version: 12.2 |" gives 12.2.
func CUDADriverVersion(b []byte) string {
	if m := cudaDriverRE.FindSubmatch(b); m != nil {
		return version(string(m[1]))
	}
	return ""
}

var (
	cudaTextRE = regexp.MustCompile(`CUDA Version\s+([0-9]+(\.[0-9]+)+)`)
	nvccRE     = regexp.MustCompile(`release [0-9.]+, V([0-9]+(\.[0-9]+)+)`)
)

// CUDAToolkitVersion reads the installed toolkit's version from
// /usr/local/cuda/version.json ({"cuda":{"version":"12.2.140"}}), an older
// toolkit's version.txt ("CUDA Version 11.0.228") or `nvcc --version`
// ("Cuda compilation tools, release 12.2, V12.2.140").
func CUDAToolkitVersion(b []byte) string {
	var j struct {
		CUDA struct {
			Version string `json:"version"`
		} `json:"cuda"`
	}
	if json.Unmarshal(b, &j) == nil && j.CUDA.Version != "" {
		return version(j.CUDA.Version)
	}
	for _, re := range []*regexp.Regexp{nvccRE, cudaTextRE} {
		if m := re.FindSubmatch(b); m != nil {
			return version(string(m[1]))
		}
	}
	return ""
}

var fabricRE = regexp.MustCompile(`(?i)fabric manager version is\s*:?\s*(\S+)`)

// FabricManagerVersion reads `nv-fabricmanager --version`:
// "Fabric Manager version is : 535.309.01".
func FabricManagerVersion(b []byte) string {
	if m := fabricRE.FindSubmatch(b); m != nil {
		return version(string(m[1]))
	}
	return ""
}

var ofedRE = regexp.MustCompile(`(?:MLNX_OFED_LINUX|OFED-internal|OFED)-([0-9][0-9A-Za-z.-]*?)[:\s]*$`)

// OFEDVersion reads `ofed_info -s`: "MLNX_OFED_LINUX-23.10-2.1.3.1:" gives
// 23.10-2.1.3.1 (DOCA-Host prints "OFED-internal-24.10-1.1.4:").
func OFEDVersion(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if m := ofedRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
		return version(m[1])
	}
	return ""
}
