// Package lab builds ingot's network-boot lab: a network namespace with a
// bridge, a tap per virtual machine, `ingot serve` on the bridge, a virtual
// BMC per VM whose power actions start and stop a QEMU process, and the
// machines enrolled with the lab-qemu recipe. Nothing in the lab touches the
// host's network: every address lives inside the namespace, and the lab's
// own processes reach its API through sockets opened inside it.
package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/netns"
)

// The lab network. It exists only inside the lab's namespace.
const (
	Bridge   = "br0"
	ServerIP = "10.77.0.1"
	cidr     = ServerIP + "/24"
	poolSpec = "10.77.0.0/24,10.77.0.100-10.77.0.200"
	// SiteIP is the site's DHCP server (a namespace of its own, on the
	// lab's bridge) when the lab runs ingot in proxy mode beside it.
	SiteIP    = "10.77.0.254"
	siteRange = "10.77.0.100,10.77.0.199,255.255.255.0,1h"
	httpPort  = 8080
	apiPort   = 8443
	bmcPort0  = 9001
	bmcUser   = "admin"
	stateFile = "lab.json"
	// LLDPName is the system name lldpd announces on the bridge: the lab
	// machines' NICs record it (Port ID "br0") as their LLDP neighbour.
	LLDPName = "ingot-lab"
)

// VMSpec asks for one lab machine.
type VMSpec struct {
	Firmware    string // bios or uefi
	FirmwarePXE bool   // uefi only: no NIC ROM, firmware PXE -> TFTP -> iPXE
	// FirmwareHTTP: uefi only, no NIC ROM, OVMF's PXE off: the firmware's
	// HTTP boot fetches the agent UKI (no TFTP, no iPXE).
	FirmwareHTTP bool
	// Arch "arm64": a QEMU virt machine under AAVMF (uefi, FirmwareHTTP),
	// enrolled with Config.RecipeARM64; "" an x86-64 VM.
	Arch string
}

// ARM64 asks for an arm64 VM: AAVMF's own HTTP boot of its agent UKI.
func ARM64() VMSpec { return VMSpec{Firmware: "uefi", FirmwareHTTP: true, Arch: ArchARM64} }

// Config builds a lab.
type Config struct {
	Dir         string // everything the lab writes: disks, logs, database, artifacts
	Prefix      string // namespace name prefix (a random suffix is added)
	Binary      string // the ingot binary (runs serve and the BMCs)
	AgentBinary string // the ingot-agent binary (goes into the initramfs)
	RepoRoot    string // holds recipes/ and images/
	VMs         []VMSpec
	DiskBytes   int64
	MemMiB      int
	Recipe      string // default lab-qemu
	// SiteDHCP "dnsmasq" runs a real dnsmasq as the site's DHCP server
	// (its own namespace, on the lab's bridge) and ingot in proxy mode
	// beside it; "" ingot's own DHCP in full mode.
	SiteDHCP string
	// Store is where serve keeps its records: "" or "bolt" the embedded
	// default; StoreEtcd a one-member etcd the lab runs inside its
	// namespace; an etcd:// URL a cluster reachable from inside it.
	Store string
	// POST is a simulated power-on self-test: every firmware start of a
	// VM waits this long (0: none; QEMU's firmware starts in about a
	// second, a GPU server's POST takes 5-15 minutes).
	POST time.Duration
	// Mutate may change the lab's recipe before it is written (tests:
	// a wrong image sha256).
	Mutate func(map[string]any)
	Out    io.Writer // progress for people
	Logger *slog.Logger
	Getenv func(string) string

	// AgentBinaryARM64 is ingot-agent built for arm64 (CGO_ENABLED=0
	// GOARCH=arm64 go build ./cmd/ingot-agent; `make build-arm64`):
	// required when VMs holds an arm64 VM.
	AgentBinaryARM64 string
	// RecipeARM64 is the recipe arm64 VMs are enrolled with (default
	// lab-qemu-arm64): its agent kernel, initramfs and image are arm64.
	RecipeARM64 string
}

// State is what `ingot lab up` leaves in Dir/lab.json for down and status.
type State struct {
	Namespace string   `json:"namespace"`
	Dir       string   `json:"dir"`
	ServerURL string   `json:"server_url"` // the boot listener (plain HTTP)
	APIURL    string   `json:"api_url"`    // the API listener (HTTPS)
	CA        string   `json:"ca"`         // serve's CA (PEM file): the CLI's --ca
	Token     string   `json:"token"`
	Accel     string   `json:"accel"`
	VMs       []VM     `json:"vms"`
	Pids      []int    `json:"pids"`
	ServePid  int      `json:"serve_pid"`
	Artifacts Pins     `json:"artifacts"`
	Recipe    string   `json:"recipe"`
	Binary    string   `json:"binary"`
	ServeArgs []string `json:"serve_args"`
	// SiteNamespace holds the site's DHCP server ("" none).
	SiteNamespace string `json:"site_namespace,omitempty"`

	// ArtifactsARM64 and RecipeARM64 are the arm64 VMs' (nil, "": none).
	ArtifactsARM64 *Pins  `json:"artifacts_arm64,omitempty"`
	RecipeARM64    string `json:"recipe_arm64,omitempty"`
}

// Lab is a running lab.
type Lab struct {
	cfg   Config
	hw    hardware
	hwARM hardware // the arm64 recipe's, when there are arm64 VMs
	ns    *netns.NS
	site  *netns.NS // the site's DHCP server, when Config.SiteDHCP is set
	State State
	HTTP  *http.Client // dials inside the namespace
	// client is Client()'s, made on first use.
	client *client.Client
}

func (c *Config) defaults() {
	if abs, err := filepath.Abs(c.Dir); err == nil {
		c.Dir = abs // credential references and the server's flags want absolute paths
	}
	if c.Prefix == "" {
		c.Prefix = "ingot-lab"
	}
	if c.DiskBytes == 0 {
		c.DiskBytes = 256 << 20
	}
	if c.MemMiB == 0 {
		c.MemMiB = 1024
	}
	if c.Recipe == "" {
		c.Recipe = "lab-qemu"
	}
	if c.RecipeARM64 == "" {
		c.RecipeARM64 = "lab-qemu-arm64"
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if len(c.VMs) == 0 {
		c.VMs = []VMSpec{{Firmware: "bios"}}
	}
}

func (c *Config) validate() error {
	if err := validStore(c.Store); err != nil {
		return err
	}
	switch c.SiteDHCP {
	case "", "dnsmasq":
	default:
		return fmt.Errorf("site DHCP %q: expected dnsmasq (or none: ingot's own DHCP)", c.SiteDHCP)
	}
	for _, v := range c.VMs {
		switch {
		case v.Arch == "":
		case v.Arch != ArchARM64:
			return fmt.Errorf("VM architecture %q: expected arm64 (or none: x86-64)", v.Arch)
		case v.Firmware != "uefi" || !v.FirmwareHTTP:
			return errors.New("an arm64 VM boots through AAVMF's HTTP boot only: firmware uefi with FirmwareHTTP (lab.ARM64())")
		case c.AgentBinaryARM64 == "":
			return errors.New("an arm64 VM needs ingot-agent built for arm64 (make build-arm64; Config.AgentBinaryARM64)")
		}
	}
	return nil
}

// hasARM64 reports whether the lab has an arm64 VM.
func (c *Config) hasARM64() bool {
	for _, v := range c.VMs {
		if v.Arch == ArchARM64 {
			return true
		}
	}
	return false
}

// Up builds (or reuses) the lab's kernel, initramfs and image, creates the
// namespace, starts ingot serve and the virtual BMCs in it and enrolls the
// machines. It does not provision them: see Provision.
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if st, err := Load(cfg.Dir); err == nil {
		if _, err := os.Stat("/var/run/netns/" + st.Namespace); err == nil {
			return nil, fmt.Errorf("a lab is already up in %s (namespace %s): run 'ingot lab down' first", cfg.Dir, st.Namespace)
		}
	}
	// A lab starts from nothing: what an earlier lab left (its database,
	// disks, recipes) is removed. Only the lab's own subfolders are touched.
	for _, sub := range []string{"data", "recipes", "vms", "bmc", "etcd"} {
		if err := os.RemoveAll(filepath.Join(cfg.Dir, sub)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	l := &Lab{cfg: cfg}
	l.State = State{Dir: cfg.Dir, Accel: Accel(cfg.Getenv), Recipe: cfg.Recipe, Binary: cfg.Binary,
		ServerURL: fmt.Sprintf("http://%s:%d", ServerIP, httpPort), APIURL: fmt.Sprintf("https://%s:%d", ServerIP, apiPort),
		CA: filepath.Join(cfg.Dir, "data", "tls", "ca.pem")}
	fmt.Fprintf(cfg.Out, "lab: building kernel, agent initramfs and the lab image (cached in %s)\n", cacheDir(cfg))
	hw, err := recipeHardware(cfg.RepoRoot, cfg.Recipe)
	if err != nil {
		return nil, err
	}
	l.hw = hw
	pins, err := buildArtifacts(ctx, cfg, hw.Image, "", cfg.AgentBinary)
	if err != nil {
		return nil, err
	}
	l.State.Artifacts = *pins
	if cfg.hasARM64() {
		fmt.Fprintf(cfg.Out, "lab: building the arm64 kernel, agent initramfs and image (Debian's arm64 packages, apt-get download)\n")
		if l.hwARM, err = recipeHardware(cfg.RepoRoot, cfg.RecipeARM64); err != nil {
			return nil, err
		}
		if l.State.ArtifactsARM64, err = buildArtifacts(ctx, cfg, l.hwARM.Image, ArchARM64, cfg.AgentBinaryARM64); err != nil {
			return nil, err
		}
		l.State.RecipeARM64 = cfg.RecipeARM64
	}
	if err := l.network(ctx); err != nil {
		l.Down()
		return nil, err
	}
	if err := l.start(ctx); err != nil {
		l.Down()
		return nil, err
	}
	return l, nil
}

func (l *Lab) network(ctx context.Context) error {
	ns, err := netns.New(ctx, l.cfg.Prefix)
	if err != nil {
		return fmt.Errorf("creating the lab namespace: %w", err)
	}
	l.ns = ns
	l.State.Namespace = ns.Name
	l.HTTP = nsHTTPClient(ns, "")
	if err := ns.AddBridge(ctx, Bridge, cidr); err != nil {
		return err
	}
	if l.cfg.SiteDHCP != "" {
		// The site's DHCP server is another machine on the boot network.
		site, err := netns.New(ctx, l.cfg.Prefix+"-site")
		if err != nil {
			return fmt.Errorf("creating the site DHCP server's namespace: %w", err)
		}
		l.site, l.State.SiteNamespace = site, site.Name
		if err := netns.Veth(ctx, site, "eth0", SiteIP+"/24", ns, "site0@"+Bridge, ""); err != nil {
			return fmt.Errorf("linking the site DHCP server to the lab bridge: %w", err)
		}
	}
	for i, spec := range l.cfg.VMs {
		kind, vars, hw := spec.Firmware, "OVMF_VARS.fd", l.hw
		if spec.Arch == ArchARM64 {
			kind, vars, hw = ArchARM64, "AAVMF_VARS.fd", l.hwARM
		}
		name := fmt.Sprintf("lab%d-%s", i+1, kind)
		vm := VM{
			Name: name, Firmware: spec.Firmware, Arch: spec.Arch, FirmwarePXE: spec.FirmwarePXE, FirmwareHTTP: spec.FirmwareHTTP,
			MAC: fmt.Sprintf("52:54:00:77:00:%02x", 0x10+i), Tap: fmt.Sprintf("tap%d", i),
			Disk:    filepath.Join(l.cfg.Dir, "vms", name, "disk.raw"),
			Console: filepath.Join(l.cfg.Dir, "vms", name, "console.log"),
			Vars:    filepath.Join(l.cfg.Dir, "vms", name, vars),
			BMCPort: bmcPort0 + i, MemMiB: l.cfg.MemMiB, POSTMillis: int(l.cfg.POST.Milliseconds()),
		}
		for d := range hw.DataDisks {
			vm.DataDisks = append(vm.DataDisks, filepath.Join(l.cfg.Dir, "vms", name, fmt.Sprintf("data%d.raw", d+1)))
		}
		if err := vm.prepare(l.cfg.DiskBytes, hw.DataDisks); err != nil {
			return err
		}
		if err := ns.AddTap(ctx, vm.Tap, Bridge); err != nil {
			return err
		}
		if err := writeBMCTree(filepath.Join(l.cfg.Dir, "bmc", name), name, vm.MemMiB); err != nil {
			return err
		}
		l.State.VMs = append(l.State.VMs, vm)
	}
	return l.save()
}

// Load reads a lab's state.
func Load(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no lab in %s: %w", dir, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &st, nil
}

func (l *Lab) save() error {
	b, err := json.MarshalIndent(l.State, "", "  ")
	if err != nil {
		return err
	}
	// Readers in other processes (the virtual BMCs, status) must never
	// see it half-written: a temporary file renamed over it.
	return durable.WriteFile(filepath.Join(l.cfg.Dir, stateFile), b, 0o600)
}

// Open attaches to a lab that `ingot lab up` left running.
func Open(dir string) (*Lab, error) {
	st, err := Load(dir)
	if err != nil {
		return nil, err
	}
	ns, err := netns.Open(st.Namespace)
	if err != nil {
		return nil, err
	}
	l := &Lab{cfg: Config{Dir: dir, Out: io.Discard}, ns: ns, State: *st, HTTP: nsHTTPClient(ns, st.CA)}
	if st.SiteNamespace != "" {
		if l.site, err = netns.Open(st.SiteNamespace); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// nsHTTPClient returns a client whose connections are opened inside ns,
// trusting the CA in caFile ("" or missing: none yet).
func nsHTTPClient(ns *netns.NS, caFile string) *http.Client {
	pool := x509.NewCertPool()
	if b, err := os.ReadFile(caFile); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext:         ns.DialContext,
		MaxIdleConnsPerHost: 4,
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// spawn starts a long-running process inside the namespace, detached from
// this process (its own session) so it outlives `ingot lab up`.
func (l *Lab) spawn(name string, args ...string) (int, error) {
	return l.spawnProgram(name, l.State.Binary, args...)
}

// spawnProgram is spawn for a program other than ingot (lldpd).
func (l *Lab) spawnProgram(name, program string, args ...string) (int, error) {
	return l.spawnIn(l.State.Namespace, name, program, args...)
}

// spawnIn is spawnProgram in namespace ns (the site's DHCP server's).
func (l *Lab) spawnIn(ns, name, program string, args ...string) (int, error) {
	logf, err := os.OpenFile(filepath.Join(l.cfg.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, program}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() // reap it if it ends while we run
	l.State.Pids = append(l.State.Pids, pid)
	return pid, l.save()
}

// Down stops every process of the lab and removes its namespace.
func (l *Lab) Down() error {
	var errs []error
	stopPids(l.State.Pids)
	l.State.Pids = nil
	_ = os.RemoveAll(lldpdDir(l.State.Namespace))
	for _, n := range []*netns.NS{l.site, l.ns} {
		if n != nil {
			if err := n.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	_ = os.Remove(filepath.Join(l.cfg.Dir, stateFile))
	return errors.Join(errs...)
}

// Down removes the lab whose state is in dir.
func Down(dir string) error {
	l, err := Open(dir)
	if err != nil {
		st, lerr := Load(dir)
		if lerr != nil {
			return lerr
		}
		stopPids(st.Pids)
		if st.SiteNamespace != "" {
			if site, err := netns.Open(st.SiteNamespace); err == nil {
				_ = site.Close()
			}
		}
		_ = os.RemoveAll(lldpdDir(st.Namespace))
		_ = os.Remove(filepath.Join(dir, stateFile))
		return nil
	}
	return l.Down()
}

// stopPids stops the lab's processes, the last started first: serve
// before the store and the BMCs it uses.
func stopPids(pids []int) {
	for _, pid := range slices.Backward(pids) {
		stopPid(pid)
	}
}

func stopPid(pid int) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	for i := 0; i < 50; i++ {
		if p.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = p.Signal(syscall.SIGKILL)
}

// KillServe SIGKILLs ingot serve (crash-recovery tests); StartServe
// starts it again on the same data.
func (l *Lab) KillServe() error {
	pid := l.State.ServePid
	if pid == 0 {
		return errors.New("lab: serve is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing serve (pid %d): %w", pid, err)
	}
	for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	var keep []int
	for _, p := range l.State.Pids {
		if p != pid {
			keep = append(keep, p)
		}
	}
	l.State.Pids, l.State.ServePid = keep, 0
	return l.save()
}
