package recipe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file lints a recipe against its image: every driver it pins and
// every burn-in check it runs needs a package or a tool in the installed
// OS, and the image must be locked (images/NAME/packages.lock) for its
// bytes to be the ones pinned.

// imageContent is what lint reads of images/NAME: the packages and
// repositories of image.yaml, the tools its files, build steps and root
// programs put in the root, and the packages its lock holds.
type imageContent struct {
	Packages     map[string]string `yaml:"packages"`
	Repositories []struct {
		Name string `yaml:"name"`
		URL  string `yaml:"url"`
	} `yaml:"repositories"`
	Files []struct {
		Path string `yaml:"path"`
	} `yaml:"files"`
	BuildSteps []struct {
		Installs []string `yaml:"installs"`
	} `yaml:"build_steps"`
	RootPrograms []string `yaml:"root_programs"`
	locked       []string // package names of packages.lock; nil without one
}

// imageNeed is what one recipe entry needs of the installed OS: a package
// (any of pkgs, by name prefix) or a tool (a file of that name), and where
// a site gets it.
type imageNeed struct {
	why, tool, from string
	pkgs            []string
}

// imageNeeds lists what r's drivers and burn-in checks need.
func imageNeeds(r *Recipe) []imageNeed {
	const cuda, doca, debian = "NVIDIA's CUDA repository", "NVIDIA's DOCA repository (DOCA-OFED)", "Debian (non-free)"
	byDriver := map[string]imageNeed{
		"nvidia":               {pkgs: []string{"nvidia-kernel-dkms", "nvidia-open-kernel-dkms", "nvidia-driver", "cuda-drivers"}, from: debian + " or " + cuda},
		"cuda-toolkit":         {pkgs: []string{"nvidia-cuda-toolkit", "cuda-toolkit"}, from: debian + " or " + cuda},
		"nvidia-fabricmanager": {pkgs: []string{"nvidia-fabricmanager"}, from: cuda},
		"ofed":                 {pkgs: []string{"mlnx-ofed", "doca-ofed"}, from: doca},
	}
	byCheck := map[string]imageNeed{
		"dcgm-diag":      {pkgs: []string{"datacenter-gpu-manager"}, from: cuda},
		"nccl-allreduce": {tool: "all_reduce_perf", from: "nccl-tests built against libnccl2 of " + cuda},
		"gpu-burn":       {tool: "gpu_burn", from: "gpu-burn built from a pinned tarball against the image's CUDA"},
		"nvbandwidth":    {tool: "nvbandwidth", from: "nvbandwidth built from a pinned tarball against the image's CUDA"},
		"cuda-bandwidth": {tool: "bandwidthTest", from: "NVIDIA's CUDA samples (Debian's nvidia-cuda-samples) built in the image"},
		"cuda-p2p":       {tool: "p2pBandwidthLatencyTest", from: "NVIDIA's CUDA samples (Debian's nvidia-cuda-samples) built in the image"},
		"cublas-gemm":    {tool: "matrixMulCUBLAS", from: "NVIDIA's CUDA samples (Debian's nvidia-cuda-samples) built in the image"},
		"clpeak":         {pkgs: []string{"clpeak"}, from: debian},
		"stress-ng":      {pkgs: []string{"stress-ng"}, tool: "stress-ng", from: "Debian"},
		"fio":            {pkgs: []string{"fio"}, tool: "fio", from: "Debian"},
		"iperf3":         {pkgs: []string{"iperf3"}, tool: "iperf3", from: "Debian"},
		"ib-write-bw":    {pkgs: []string{"perftest"}, tool: "ib_write_bw", from: "Debian or " + doca},
	}
	var out []imageNeed
	for _, k := range sortedMapKeys(r.Drivers) {
		if n, ok := byDriver[k]; ok {
			n.why = "drivers." + k
			out = append(out, n)
		}
	}
	for _, c := range r.Acceptance.Checks {
		if n, ok := byCheck[c.Name]; ok {
			n.why = "check " + c.Name
			out = append(out, n)
		}
	}
	return out
}

func sortedMapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readImageContent reads images/NAME/image.yaml and its packages.lock.
func readImageContent(dir string) (*imageContent, error) {
	b, err := os.ReadFile(filepath.Join(dir, "image.yaml"))
	if err != nil {
		return nil, err
	}
	var c imageContent
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "image.yaml"), err)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "packages.lock"))
	if err != nil {
		return &c, nil
	}
	c.locked = []string{}
	sc := bufio.NewScanner(bytes.NewReader(lock))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 1 && f[0] == "deb" {
			c.locked = append(c.locked, f[1])
		}
	}
	return &c, nil
}

// has reports whether the image provides n.
func (c *imageContent) has(n imageNeed) bool {
	pkgs := c.locked
	if pkgs == nil {
		pkgs = sortedMapKeys(c.Packages)
	}
	for _, p := range pkgs {
		for _, want := range n.pkgs {
			if strings.HasPrefix(p, want) {
				return true
			}
		}
	}
	if n.tool == "" {
		return false
	}
	tools := append([]string(nil), c.RootPrograms...)
	for _, f := range c.Files {
		tools = append(tools, f.Path)
	}
	for _, st := range c.BuildSteps {
		tools = append(tools, st.Installs...)
	}
	return slices.ContainsFunc(tools, func(p string) bool { return filepath.Base(p) == n.tool })
}

// imageProvides lints r against its image in the images folder: a lock,
// and what its drivers and burn-in checks need. In a template the
// findings are warnings (it may wait for its site repository); in a
// recipe machines are assigned to, errors.
func (l *linter) imageProvides(r *Recipe) {
	if l.imagesDir == "" || r.OS.Image.Name == "" || !nameRE.MatchString(r.OS.Image.Name) {
		return
	}
	dir := filepath.Join(l.imagesDir, r.OS.Image.Name)
	c, err := readImageContent(dir)
	if err != nil {
		return // os.image.name reports a missing image
	}
	bad, warn := l.bad, l.warn
	if p := l.at("os.image.name"); p.file != l.file && l.has("extends") {
		// The image is inherited: say so where this file names its base.
		bad = func(_, format string, args ...any) { l.bad("extends", "inherited "+format, args...) }
		warn = func(_, format string, args ...any) { l.warn("extends", "inherited "+format, args...) }
	}
	report := bad
	if r.IsTemplate() {
		report = warn
	}
	var repos []string
	for _, rp := range c.Repositories {
		repos = append(repos, rp.Name+" ("+rp.URL+")")
	}
	if c.locked == nil {
		how := "run `ingot image lock " + dir + "`"
		if len(repos) > 0 {
			how = "configure and lock its repositories " + strings.Join(repos, ", ") + ": " + how
		}
		report("os.image.name", "image %s has no packages.lock, so its bytes cannot be pinned: %s", r.OS.Image.Name, how)
	}
	var missing []string
	for _, n := range imageNeeds(r) {
		if !c.has(n) {
			what := n.tool
			if len(n.pkgs) > 0 {
				what = strings.Join(n.pkgs, " or ")
			}
			missing = append(missing, fmt.Sprintf("%s (%s, from %s)", what, n.why, n.from))
		}
	}
	if len(missing) > 0 {
		report("os.image.name", "image %s does not install what the recipe needs: %s", r.OS.Image.Name, strings.Join(missing, "; "))
	}
}
