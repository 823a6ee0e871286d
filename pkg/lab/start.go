package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// start lays out the server's data, starts the BMCs and ingot serve in the
// namespace, waits until the API answers, and enrolls the machines.
func (l *Lab) start(ctx context.Context) error {
	data := filepath.Join(l.cfg.Dir, "data")
	if err := l.importArtifacts(ctx, data); err != nil {
		return err
	}
	if err := l.writeRecipes(); err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(l.cfg.Dir, "bmc.password"), []byte("lab-"+fleet.NewSecret("")[:12]+"\n"), 0o600); err != nil {
		return err
	}
	if _, err := l.spawn("bmc", "lab", "bmc", "--dir", l.cfg.Dir); err != nil {
		return err
	}
	l.startLLDP()
	dhcp := []string{"--dhcp", "full", "--pool", poolSpec}
	if l.cfg.SiteDHCP == "dnsmasq" {
		if err := l.startSiteDHCP(); err != nil {
			return err
		}
		// Beside the site's DHCP, ingot answers only network-boot clients,
		// with boot options and no address (proxyDHCP, ports 67 and 4011).
		dhcp = []string{"--dhcp", "proxy"}
	}
	store, err := l.storeArgs(ctx)
	if err != nil {
		return err
	}
	l.State.ServeArgs = append([]string{"serve", "--interface", Bridge, "--data", data,
		"--recipes", filepath.Join(l.cfg.Dir, "recipes")}, append(dhcp,
		"--http-addr", fmt.Sprintf("%s:%d", ServerIP, httpPort), "--api-addr", fmt.Sprintf("%s:%d", ServerIP, apiPort),
		"--discovery-cmdline", "console=ttyS0",
		"--bmc-credentials-dir", l.cfg.Dir)...)
	l.State.ServeArgs = append(l.State.ServeArgs, store...)
	if err := l.StartServe(ctx); err != nil {
		return err
	}
	if err := l.takeToken(ctx, data); err != nil {
		return err
	}
	return l.enroll(ctx)
}

// StartServe starts `ingot serve` in the namespace and waits for its API.
func (l *Lab) StartServe(ctx context.Context) error {
	pid, err := l.spawn("serve", l.State.ServeArgs...)
	if err != nil {
		return err
	}
	// `ip netns exec` execs ingot in place: the pid is serve's own.
	l.State.ServePid = pid
	if err := l.save(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		// serve makes its CA on start: trust it once it is there.
		if l.client == nil {
			l.HTTP = nsHTTPClient(l.ns, l.State.CA)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", l.State.APIURL+"/healthz", nil)
		resp, err := l.HTTP.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ingot serve did not answer on %s within 60s (see %s): %v", l.State.APIURL,
				filepath.Join(l.cfg.Dir, "serve.log"), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// importArtifacts puts the kernel, initramfs and image into the server's
// content-addressed store.
func (l *Lab) importArtifacts(ctx context.Context, data string) error {
	st, err := artifact.Open(filepath.Join(data, "artifacts"))
	if err != nil {
		return err
	}
	type art struct{ path, sha, name string }
	p := l.State.Artifacts
	arts := []art{{p.Kernel, p.KernelSHA256, "agent-vmlinuz"}, {p.Initrd, p.InitrdSHA256, "agent-initrd"}, {p.Image, p.ImageSHA256, p.ImageName + ".raw.zst"}}
	if a := l.State.ArtifactsARM64; a != nil {
		arts = append(arts, art{a.Kernel, a.KernelSHA256, armKernel}, art{a.Initrd, a.InitrdSHA256, armInitrd}, art{a.Image, a.ImageSHA256, a.ImageName + ".raw.zst"})
	}
	for _, f := range arts {
		ref, err := st.PutFile(ctx, f.path)
		if err != nil {
			return fmt.Errorf("importing %s: %w", f.path, err)
		}
		if ref.SHA256 != f.sha {
			return fmt.Errorf("importing %s: sha256 %s, expected %s", f.path, ref.SHA256, f.sha)
		}
		// The names are what serve's discovery defaults and the recipe use.
		if err := st.SetName(f.name, f.sha); err != nil {
			return err
		}
	}
	return nil
}

// The arm64 agent's names in the artifact store (the arm64 recipe's).
const (
	armKernel = "agent-vmlinuz-arm64"
	armInitrd = "agent-initrd-arm64"
)

// writeRecipes copies the repository's recipes into the lab and pins the
// lab recipe (and the arm64 VMs' recipe) to what the lab built: the lab
// boots exactly these bytes.
func (l *Lab) writeRecipes() error {
	src := filepath.Join(l.cfg.RepoRoot, "recipes")
	dst := filepath.Join(l.cfg.Dir, "recipes")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("reading recipes: %w", err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		switch {
		case e.Name() == l.cfg.Recipe+".yaml":
			b, err = l.pin(b, l.State.Artifacts, "agent-vmlinuz", "agent-initrd")
		case e.Name() == l.State.RecipeARM64+".yaml" && l.State.ArtifactsARM64 != nil:
			b, err = l.pin(b, *l.State.ArtifactsARM64, armKernel, armInitrd)
		}
		if err != nil {
			return fmt.Errorf("pinning %s: %w", e.Name(), err)
		}
		if err := durable.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// pin sets a recipe's image and agent to p, the agent's kernel and
// initramfs under the artifact store's names kernel and initrd.
func (l *Lab) pin(b []byte, p Pins, kernel, initrd string) ([]byte, error) {
	var r map[string]any
	if err := yaml.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	osec := sub(r, "os")
	img := sub(osec, "image")
	img["sha256"], img["format"] = p.ImageSHA256, "raw.zst"
	agent := sub(osec, "agent")
	k, i := sub(agent, "kernel"), sub(agent, "initrd")
	k["sha256"], k["path"] = p.KernelSHA256, kernel
	i["sha256"], i["path"] = p.InitrdSHA256, initrd
	if l.cfg.Mutate != nil {
		l.cfg.Mutate(r)
	}
	var out bytes.Buffer
	out.WriteString("# Written by `ingot lab up`: the shipped recipe pinned to the artifacts the lab built.\n")
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return out.Bytes(), enc.Close()
}

func sub(m map[string]any, k string) map[string]any {
	if v, ok := m[k].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[k] = v
	return v
}

// takeToken makes the lab's operator token through the API, as a user
// would, with the first token serve wrote on its first start
// (DATA/admin.token): the lab never opens the store itself.
func (l *Lab) takeToken(ctx context.Context, data string) error {
	first, err := os.ReadFile(filepath.Join(data, wire.BootstrapTokenFile))
	if err != nil {
		return fmt.Errorf("reading the first operator token ingot serve writes on its first start: %w", err)
	}
	c, err := client.New(client.Config{Server: l.State.APIURL, Token: strings.TrimSpace(string(first)), HTTP: l.HTTP})
	if err != nil {
		return err
	}
	made, err := c.CreateToken(ctx, "lab", fleet.ScopeOperator, 0)
	if err != nil {
		return fmt.Errorf("making the lab's operator token: %w", err)
	}
	l.State.Token, l.client = made.Secret, nil
	return l.save()
}

// enroll adds each VM through the API with its BMC. The lab's virtual BMCs
// serve plain http on the namespace's loopback, so each machine is marked
// insecure (the server sends a BMC credential over http only to a machine
// marked so), and the lab says so.
func (l *Lab) enroll(ctx context.Context) error {
	if len(l.State.VMs) > 0 {
		fmt.Fprintf(l.cfg.Out, "lab: the virtual BMCs serve plain http on 127.0.0.1 inside the lab's namespace: their machines are enrolled with --bmc-insecure (never do that on a network you do not trust)\n")
	}
	for i, vm := range l.State.VMs {
		rc := l.cfg.Recipe
		if vm.Arch == ArchARM64 {
			rc = l.State.RecipeARM64
		}
		m := machine.Machine{
			Name: vm.Name, MACs: []string{vm.MAC}, Recipe: rc, Rack: "lab", Index: i + 1,
			BMC: machine.BMC{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", vm.BMCPort),
				CredentialRef: "file:" + filepath.Join(l.cfg.Dir, "bmc.cred"), Insecure: true},
		}
		if _, err := l.Client().Enroll(ctx, m); err != nil {
			return fmt.Errorf("enrolling %s: %w", vm.Name, err)
		}
	}
	pw, err := os.ReadFile(filepath.Join(l.cfg.Dir, "bmc.password"))
	if err != nil {
		return err
	}
	cred := fmt.Sprintf("username=%s\npassword=%s\n", bmcUser, strings.TrimSpace(string(pw)))
	return durable.WriteFile(filepath.Join(l.cfg.Dir, "bmc.cred"), []byte(cred), 0o600)
}

// RewriteRecipe changes the lab's pinned recipe and restarts ingot serve so
// it loads it (recipes are read at start).
func (l *Lab) RewriteRecipe(fn func(map[string]any)) error {
	p := filepath.Join(l.State.Dir, "recipes", l.State.Recipe+".yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var r map[string]any
	if err := yaml.Unmarshal(b, &r); err != nil {
		return err
	}
	fn(r)
	out, err := yaml.Marshal(r)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(p, out, 0o644); err != nil {
		return err
	}
	if err := l.KillServe(); err != nil {
		return err
	}
	return l.StartServe(context.Background())
}

// lldpdConf is lldpd's configuration: a frame every 2 s (the agent listens
// a few seconds, a switch's 30 s would mostly miss it), the bridge's name
// as Port ID.
const lldpdConf = `configure lldp tx-interval 2
configure system hostname ` + LLDPName + `
configure system description "ingot lab bridge"
configure lldp portidsubtype ifname
`

// startLLDP runs lldpd on the bridge, so the machines' NICs hear a switch
// port. A bridge does not forward LLDP between its ports (802.1D reserves
// 01:80:c2:00:00:0e), but what lldpd sends on the bridge device leaves
// every port (pkg/agent/lldp's TestIntegrationLLDPDOnBridge). Without
// lldpd the lab works, its NICs without an LLDP neighbour: a warning.
func (l *Lab) startLLDP() {
	warn := func(err error) {
		fmt.Fprintf(l.cfg.Out, "lab: warning: the lab bridge sends no LLDP, the machines' NICs will have no neighbour: %v\n", err)
		l.cfg.Logger.Warn("lab bridge sends no LLDP", "err", err)
	}
	path, err := exec.LookPath("lldpd")
	if err != nil {
		warn(fmt.Errorf("%w ('make deps' installs it)", err))
		return
	}
	// lldpd applies its configuration with lldpcli run as user _lldpd: the
	// file and the control socket go where that user can reach them, which
	// the lab's folder (often 0700) may not be.
	dir := lldpdDir(l.State.Namespace)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		warn(err)
		return
	}
	conf := filepath.Join(dir, "lldpd.conf")
	if err := errors.Join(os.Chmod(dir, 0o755), durable.WriteFile(conf, []byte(lldpdConf), 0o644)); err != nil {
		warn(err)
		return
	}
	// -d -d: in the foreground (spawn keeps its pid), logging to lldpd.log.
	if _, err := l.spawnProgram("lldpd", path, "-d", "-d", "-I", Bridge, "-O", conf,
		"-p", filepath.Join(dir, "lldpd.pid"), "-u", filepath.Join(dir, "lldpd.socket")); err != nil {
		warn(err)
	}
}

// lldpdDir holds the lab's lldpd configuration, pid file and socket.
func lldpdDir(namespace string) string {
	if namespace == "" {
		return ""
	}
	return filepath.Join(os.TempDir(), namespace+"-lldpd")
}

// startSiteDHCP runs dnsmasq as the site's DHCP server in its own
// namespace: addresses from 10.77.0.100-199, no boot options, no DNS; its
// leases go to site-dhcp.leases, its log to site-dhcp.log.
func (l *Lab) startSiteDHCP() error {
	path, err := exec.LookPath("dnsmasq")
	if err != nil {
		return fmt.Errorf("the site DHCP server: %w ('make deps' installs dnsmasq-base)", err)
	}
	_, err = l.spawnIn(l.State.SiteNamespace, "site-dhcp", path, "--keep-in-foreground", "--log-facility=-", "--conf-file=/dev/null",
		"--port=0", "--interface=eth0", "--bind-interfaces", "--dhcp-range="+siteRange, "--dhcp-authoritative", "--log-dhcp",
		"--dhcp-leasefile="+filepath.Join(l.cfg.Dir, "site-dhcp.leases"), "--pid-file=", "--user=root", "--group=root")
	return err
}
