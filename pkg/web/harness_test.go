package web_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent/agentsim"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/serve"
	"github.com/ingot-dev/ingot/pkg/telemetry"
	"github.com/ingot-dev/ingot/pkg/vbmc"
	"github.com/ingot-dev/ingot/pkg/web/webtest"
)

// lab is a real `ingot serve` built in-process (serve.Build, then the
// parts' own Serve: the boot listener and the API's TLS listener with the
// dashboard, as `ingot serve` runs them) over a seeded store: machines in
// racks r01.. of 50 each, most ready with an 8-GPU inventory, some
// failed with reasons, some busy; the first BMCs per rack virtual
// (pkg/vbmc, real Redfish, polled by telemetry) with a day of power
// readings; an operator and a read-only token; and the simulated agent
// (pkg/agent/agentsim) playing every machine that network-boots.
type lab struct {
	t        testing.TB
	ctx      context.Context
	p        *serve.Parts
	url      string // https://127.0.0.1:PORT
	ca       string // the CA's PEM file
	op, ro   string // operator and read-only token secrets
	bmcs     *vbmc.Fleet
	recipes  string
	machines []string // names, in enrolment order
	withBMC  map[string]*vbmc.BMC
	log      *webtest.Buffer
}

type labOptions struct {
	machines  int           // default 20
	bmcs      int           // virtual BMCs, the first machines of each rack in turn
	telemetry time.Duration // 0: no polling
	// slow names the machines whose agent writes its image in 30 steps
	// 250 ms apart, slowly enough for a browser to watch; they stay ready
	// when seeded.
	slow []string
	// slowSteps and slowDelay change the slow machines' 30 steps and
	// 250 ms.
	slowSteps int
	slowDelay time.Duration
}

const racksPer = 50

func machineName(i int) string { return fmt.Sprintf("r%02d-n%02d", i/racksPer+1, i%racksPer+1) }

func newLab(t testing.TB, o labOptions) *lab {
	t.Helper()
	if o.machines == 0 {
		o.machines = 20
	}
	ctx, cancel := context.WithCancel(context.Background())
	data, credDir := t.TempDir(), t.TempDir()
	l := &lab{t: t, ctx: ctx, ca: filepath.Join(data, "tls", "ca.pem"), withBMC: map[string]*vbmc.BMC{}, log: &webtest.Buffer{}}
	l.recipes = writeRecipes(t, filepath.Join(data, "artifacts"))
	cred := filepath.Join(credDir, "bmc.cred")
	if err := os.WriteFile(cred, []byte("username=admin\npassword=pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := serve.Defaults()
	cfg.Data, cfg.DB, cfg.Recipes, cfg.SecretKeyFile = data, filepath.Join(data, "ingot.db"), l.recipes, filepath.Join(data, "secrets.key")
	cfg.DHCP, cfg.TFTP, cfg.AgentBinding, cfg.BMCCredentialsDir = "off", false, "first-use", credDir
	cfg.HTTPAddr, cfg.APIAddr, cfg.LogLevel = "127.0.0.1:0", "127.0.0.1:0", "warn"
	cfg.TelemetryInterval, cfg.InventoryRefresh = o.telemetry, 0
	cfg.HTTPWriteTimeout = 3 * time.Second // short: the live stream must outlive it
	ready := make(chan serve.Addrs, 1)
	p, err := serve.Build(ctx, cfg, serve.Options{Version: "test", Logger: slog.New(slog.NewTextHandler(l.log, nil)),
		Ready: func(a serve.Addrs) { ready <- a }})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	l.p = p
	if o.bmcs > 0 {
		if l.bmcs, err = vbmc.StartFleet(ctx, o.bmcs, vbmc.Config{Root: mockup(t, "dmtf-public-rackmount1"), Username: "admin", Password: "pw"}); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	l.seed(o, cred)
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !t.Failed() {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop within 20 s")
		}
		if l.bmcs != nil {
			l.bmcs.Close()
		}
		p.Close()
		if t.Failed() {
			t.Logf("serve's log:\n%s", l.log)
		}
	})
	select {
	case a := <-ready:
		l.url = a.APIURL
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve bound nothing within 30 s")
	}
	l.startSim(o)
	return l
}

// seed enrols the machines through the fleet (the one writer of
// machines), moves them to their states with reasons, stores their
// inventories, makes the tokens, and gives telemetry a day of readings.
func (l *lab) seed(o labOptions, cred string) {
	t, ctx, fl := l.t, l.ctx, l.p.Fleet
	var err error
	if l.op, _, err = fl.CreateToken(ctx, "alice", fleet.ScopeOperator, 0, "test"); err != nil {
		t.Fatal(err)
	}
	if l.ro, _, err = fl.CreateToken(ctx, "rob", fleet.ScopeReadOnly, 0, "test"); err != nil {
		t.Fatal(err)
	}
	racks := (o.machines + racksPer - 1) / racksPer
	perRack := (o.bmcs + racks - 1) / max(racks, 1)
	var bmcIdx int
	var wg sync.WaitGroup
	errs := make(chan error, o.machines)
	sem := make(chan struct{}, 16)
	for i := range o.machines {
		name := machineName(i)
		l.machines = append(l.machines, name)
		m := machine.Machine{Name: name, Rack: fmt.Sprintf("r%02d", i/racksPer+1), Index: i%racksPer + 1, Recipe: "gpu-h100",
			MACs: []string{fmt.Sprintf("52:54:01:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff)}, Serial: fmt.Sprintf("S821GE%05d", i)}
		if i%racksPer >= 45 {
			m.Recipe = "cpu-std"
		}
		if l.bmcs != nil && bmcIdx < len(l.bmcs.URLs) && i%racksPer < perRack {
			m.BMC = machine.BMC{Endpoint: l.bmcs.URLs[bmcIdx], CredentialRef: "file:" + cred, Insecure: true}
			m.Recipe = "gpu-h100-lab"
			l.withBMC[name] = l.bmcs.BMCs[bmcIdx]
			bmcIdx++
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := seedMachine(ctx, fl, m, i, slices.Contains(o.slow, name)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if tel := l.p.Telemetry(); tel != nil {
		l.seedReadings(tel)
	}
}

// seedMachine enrols one machine and walks it to the state its number
// gives, storing its inventory.
func seedMachine(ctx context.Context, fl *fleet.Service, m machine.Machine, i int, keepReady bool) error {
	mm, err := fl.Enroll(ctx, m, "operator:seed")
	if err != nil {
		return err
	}
	steps := []machine.State{machine.StateProvisioning, machine.StateVerifying, machine.StateReady}
	reason := "seeded"
	switch {
	case keepReady:
	case i%50 == 7 || i%97 == 13:
		steps = []machine.State{machine.StateProvisioning, machine.StateFailed}
		reason = fmt.Sprintf("step image: the agent reported: writing /dev/nvme0n1: input/output error at sector %d", 1000+i)
	case i%50 == 20:
		steps = steps[:1]
	case i%50 == 30:
		steps = nil
	}
	for _, st := range steps {
		r := "seeded"
		if st == machine.StateFailed {
			r = reason
		}
		if err := fl.Transition(ctx, mm.ID, st, "engine", r, nil); err != nil {
			return err
		}
	}
	if i%50 == 30 {
		return nil // enrolled, never inventoried
	}
	_, err = fl.PutInventory(ctx, mm.ID, inventoryOf(i))
	return err
}

// inventoryOf is machine i's in-band inventory: 8 H100s (some with a
// degraded link, one unhealthy, one fallen off the bus), BIOS and GPU
// firmware mostly at the recipe's pins.
func inventoryOf(i int) machine.Inventory {
	inv := machine.Inventory{Source: "agent", Taken: time.Now().UTC(),
		System: machine.System{Vendor: "Supermicro", Model: "SYS-821GE-TNHR", Serial: fmt.Sprintf("S821GE%05d", i), BIOSVersion: "2.1.0"},
		CPUs:   []machine.CPU{{Socket: "CPU0", Vendor: "Intel", Model: "Intel(R) Xeon(R) Platinum 8480+", Cores: 56, Threads: 112}},
		DIMMs:  []machine.DIMM{{Slot: "A1", SizeMiB: 65536, Type: "DDR5"}, {Slot: "B1", SizeMiB: 65536, Type: "DDR5"}},
		Disks:  []machine.Disk{{Name: "/dev/nvme0n1", Model: "Micron_7450", Serial: fmt.Sprintf("M%05d", i), SizeBytes: 960_197_124_096, Health: "OK"}},
		NICs:   []machine.NIC{{Name: "eno1", MAC: fmt.Sprintf("52:54:01:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff), SpeedMbps: 25000, LinkUp: true, Boot: true}},
	}
	if i%31 == 5 {
		inv.System.BIOSVersion = "2.0.9"
	}
	gpus := 8
	if i%83 == 11 {
		gpus = 7 // one fallen off the bus
	}
	for g := range gpus {
		gpu := machine.GPU{Slot: fmt.Sprintf("SXM%d", g+1), Vendor: "NVIDIA", Model: "NVIDIA H100 80GB HBM3", VRAMMiB: 81559,
			PCIAddress: fmt.Sprintf("0000:%02x:00.0", 0x18+g*0x10), LinkCurrent: machine.PCIeLink{Gen: 5, Width: 16},
			LinkMax: machine.PCIeLink{Gen: 5, Width: 16}, Serial: fmt.Sprintf("1652%05d%d", i, g), Firmware: "96.00.74.00.01", Health: "OK"}
		if i%41 == 3 && g == 2 {
			gpu.LinkCurrent = machine.PCIeLink{Gen: 4, Width: 8}
		}
		if i%59 == 9 && g == 5 {
			gpu.Health = "Critical"
		}
		if i%37 == 2 {
			gpu.Firmware = "96.00.61.00.01"
		}
		inv.GPUs = append(inv.GPUs, gpu)
	}
	return inv
}

// seedReadings gives every machine with a BMC a day of 5-minute power
// and inlet readings (a daily swing, each machine its own level), and
// scripts its virtual BMC's live readings; one rack runs hot.
func (l *lab) seedReadings(tel *telemetry.Service) {
	now := time.Now()
	k := 0
	for _, name := range l.machines {
		b := l.withBMC[name]
		if b == nil {
			continue
		}
		m, err := l.p.Fleet.Get(l.ctx, name)
		if err != nil {
			l.t.Fatal(err)
		}
		base := 4200 + float64(k%7)*180
		if k == 7 {
			base *= 1.4 // a node drawing more than its class per GPU: inefficient
		}
		for t := now.Add(-24 * time.Hour); t.Before(now); t = t.Add(telemetry.BucketSize) {
			swing := 900 * float64((t.Hour()+k)%24) / 24
			tel.Aggregates().Add(telemetry.Sample{Machine: m.ID, Time: t, Up: true, PowerOn: true, Watts: base + swing,
				InletC: 21 + float64(k%5), GPUMaxC: 60, PSUInputWatts: (base + swing) * 1.06, PSUOutputWatts: base + swing, MemCorrectable: -1})
		}
		inlet := 22.0 + float64(k%5)
		if k == 3 {
			inlet = 33 // above the recipe's 30 °C: inlet-temperature fires
		}
		if err := b.Script(vbmc.Scenario{Steps: []vbmc.Step{{At: 0, Watts: base + 300, InletCelsius: inlet}}}); err != nil {
			l.t.Fatal(err)
		}
		k++
	}
}

// startSim runs the simulated agent: the slow machines write their image
// in 30 steps 250 ms apart; the others in one.
func (l *lab) startSim(o labOptions) {
	sim := agentsim.New(agentsim.Config{URL: l.url, Client: l.client(nil), Jobs: l.p.Engine, Machines: l.p.Fleet, Boot: l.p.API,
		Node: func(id string) (*agentsim.Node, bool) {
			n := &agentsim.Node{Inventory: func(api.Task) machine.Inventory { return inventoryOf(0) }}
			if m, err := l.p.Fleet.Get(l.ctx, id); err == nil && slices.Contains(o.slow, m.Name) {
				steps, delay := cmp.Or(o.slowSteps, 30), cmp.Or(o.slowDelay, 250*time.Millisecond)
				n.Image = func(api.Task) []api.Progress {
					ps := agentsim.ImageProgress(8<<30, steps)
					for i := range ps {
						ps[i].RateBps = float64(8<<30) / float64(steps) / delay.Seconds()
					}
					return ps
				}
				n.Delay = delay
			}
			return n, true
		}})
	go sim.Run(l.ctx)
}

// client is an HTTPS client trusting the lab's CA, with jar for cookies
// (nil: none) and no redirects followed.
func (l *lab) client(jar http.CookieJar) *http.Client {
	pool := x509.NewCertPool()
	b, err := os.ReadFile(l.ca)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		l.t.Fatalf("reading the CA %s: %v", l.ca, err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func newJar() http.CookieJar {
	j, _ := cookiejar.New(nil)
	return j
}

// writeRecipes writes the lab's recipes and racks.yaml, their image and
// agent pinned to small files in the content store at storeDir.
func writeRecipes(t testing.TB, storeDir string) string {
	t.Helper()
	dir := t.TempDir()
	arts, err := artifact.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	sha := func(s string) string {
		ref, err := arts.Put(context.Background(), strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return ref.SHA256
	}
	osb := fmt.Sprintf(osBlock, sha("image"), sha("kernel"), sha("initrd"))
	files := map[string]string{
		"gpu-h100.yaml":     gpuRecipe + osb,
		"gpu-h100-lab.yaml": labRecipe() + osb,
		"cpu-std.yaml":      cpuRecipe + osb,
		"racks.yaml":        racksYAML(10),
	}
	for name, body := range files {
		if err := writeFile(filepath.Join(dir, name), body); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const gpuRecipe = `name: gpu-h100
version: "3"
description: 8x H100 SXM training nodes
owner: ml-infra
hardware:
  gpus:
    - vendor: nvidia
      model: H100
      count: 8
      pcie_gen: 5
      pcie_width: 16
firmware:
  bios:
    version: 2.1.0
    policy: warn
  gpu:
    version: 96.00.74.00.01
    policy: block
bios:
  attributes:
    ProcTurboMode: Disabled
acceptance:
  checks:
    - name: gpu-count
      min: 8
power:
  idle_watts: 1500
  load_watts: 6000
alerts:
  inlet_celsius_max: 30
  for: 1s
timeouts:
  retries: 1
`

// labRecipe is gpu-h100 for the machines behind the virtual BMCs, whose
// Redfish tree (the DMTF rackmount mockup) lists no GPUs and 400 W of
// power supplies: its GPU pin only warns, and it names no load watts.
func labRecipe() string {
	r := strings.Replace(gpuRecipe, "name: gpu-h100\n", "name: gpu-h100-lab\n", 1)
	r = strings.Replace(r, "    version: 96.00.74.00.01\n    policy: block\n", "    version: 96.00.74.00.01\n    policy: warn\n", 1)
	return strings.Replace(r, "power:\n  idle_watts: 1500\n  load_watts: 6000\n", "", 1)
}

const cpuRecipe = `name: cpu-std
version: "1"
description: CPU service nodes
bios:
  attributes:
    ProcTurboMode: Disabled
timeouts:
  retries: 1
`

const osBlock = `os:
  image:
    name: lab
    sha256: "%s"
    format: raw.zst
  agent:
    kernel:
      path: agent-vmlinuz
      sha256: "%s"
    initrd:
      path: agent-initrd
      sha256: "%s"
`

func racksYAML(n int) string {
	var b strings.Builder
	b.WriteString("racks:\n")
	for i := 1; i <= n; i++ {
		amps := 32
		if i == 4 {
			amps = 16 // a tight rack: its headroom is small
		}
		fmt.Fprintf(&b, "  - name: r%02d\n    feed_volts: 415\n    phases: 3\n    breaker_amps: %d\n    startup_margin_watts: 2000\n    pue: 1.3\n    tariff_per_kwh: 0.21\n", i, amps)
	}
	return b.String()
}

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o644) }

// mockup is a Redfish mockup of the repository's testdata.
func mockup(t testing.TB, name string) string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "redfish-mockups", name)
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = filepath.Dir(dir)
	}
}
