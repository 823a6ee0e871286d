package storm

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns"
)

// PeerConfig starts the classic stack a storm compares ingot with:
// dnsmasq (DHCP and TFTP, dnsmasq-base) and nginx (HTTP, nginx-light)
// serving the same first stages, kernel and initrd.
type PeerConfig struct {
	NS         *netns.NS // the server namespace (Link made its interface)
	Dir        string
	FirstStage string // the folder of undionly.kpxe and snponly.efi (/usr/lib/ipxe)
	Kernel     string
	Initrd     string
	// TFTPMax is dnsmasq's --tftp-max (0: its default, 50).
	TFTPMax int
}

// Peer is a running dnsmasq and nginx.
type Peer struct {
	cfg     PeerConfig
	dnsmasq *exec.Cmd
	nginx   *exec.Cmd
}

// peerScript is the iPXE script nginx serves as a file: the agent's kernel
// and initrd, no credential (the peers have no API).
const peerScript = `#!ipxe
kernel http://%[1]s:%[2]d/vmlinuz initrd=initrd.img console=ttyS0
initrd --name initrd.img http://%[1]s:%[2]d/initrd.img
boot
`

// nginxConf serves Dir/www on the boot address as a site would: sendfile,
// no access log, workers per core. Run as root: the test's folders are
// private to it.
const nginxConf = `user root;
daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx-error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 65;
  default_type application/octet-stream;
  client_body_temp_path %[1]s/tmp;
  server {
    listen %[2]s:%[3]d;
    root %[1]s/www;
    location / { }
  }
}
`

// StartPeer lays the files out, starts dnsmasq and nginx in the server
// namespace, and waits until both listen.
func StartPeer(ctx context.Context, cfg PeerConfig) (*Peer, error) {
	www, tftp := filepath.Join(cfg.Dir, "www"), filepath.Join(cfg.Dir, "tftp")
	for _, d := range []string{www, tftp, filepath.Join(cfg.Dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	links := map[string]string{filepath.Join(www, "vmlinuz"): cfg.Kernel, filepath.Join(www, "initrd.img"): cfg.Initrd}
	for _, f := range []string{"undionly.kpxe", "snponly.efi"} {
		links[filepath.Join(tftp, f)] = filepath.Join(cfg.FirstStage, f)
	}
	for dst, src := range links {
		if err := copyFile(src, dst); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(www, "ipxe"), fmt.Appendf(nil, peerScript, ServerIP, httpPort), 0o644); err != nil {
		return nil, err
	}
	conf := filepath.Join(cfg.Dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, cfg.Dir, ServerIP, httpPort), 0o644); err != nil {
		return nil, err
	}
	p := &Peer{cfg: cfg}
	var err error
	if p.dnsmasq, err = p.spawn("dnsmasq", "dnsmasq", p.dnsmasqArgs(tftp)...); err != nil {
		return nil, err
	}
	if p.nginx, err = p.spawn("nginx", "nginx", "-c", conf, "-p", cfg.Dir); err != nil {
		p.Stop()
		return nil, err
	}
	if err := p.waitHTTP(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// dnsmasqArgs: DHCP on the pool, TFTP of the first stages by arch, and the
// script URL for iPXE (told apart by its option 175, as dnsmasq's own
// documentation does it). --no-ping: dnsmasq would otherwise ping each
// address before offering it, which ingot does not do either.
func (p *Peer) dnsmasqArgs(tftp string) []string {
	args := []string{"--keep-in-foreground", "--port=0", "--conf-file=/dev/null", "--user=root", "--group=root",
		"--interface=" + ServerIface, "--bind-interfaces", "--log-facility=" + filepath.Join(p.cfg.Dir, "dnsmasq-events.log"),
		"--dhcp-range=" + PoolStart + "," + PoolEnd + ",255.255.0.0,1h", "--dhcp-authoritative", "--no-ping",
		"--dhcp-lease-max=100000", "--dhcp-leasefile=" + filepath.Join(p.cfg.Dir, "leases"),
		"--pid-file=" + filepath.Join(p.cfg.Dir, "dnsmasq.pid"),
		"--enable-tftp", "--tftp-root=" + tftp,
		"--dhcp-match=set:ipxe,175",
		"--dhcp-match=set:efi64,option:client-arch,7",
		fmt.Sprintf("--dhcp-boot=tag:ipxe,http://%s:%d/ipxe?mac=${net0/mac}", ServerIP, httpPort),
		"--dhcp-boot=tag:!ipxe,tag:efi64,snponly.efi",
		"--dhcp-boot=tag:!ipxe,tag:!efi64,undionly.kpxe",
	}
	if p.cfg.TFTPMax > 0 {
		args = append(args, fmt.Sprintf("--tftp-max=%d", p.cfg.TFTPMax))
	}
	return args
}

func (p *Peer) spawn(name, bin string, args ...string) (*exec.Cmd, error) {
	return spawn(p.cfg.NS, p.cfg.Dir, name, bin, args...)
}

func (p *Peer) waitHTTP(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	addr := net.JoinHostPort(ServerIP, fmt.Sprint(httpPort))
	for {
		c, err := p.cfg.NS.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			b, _ := os.ReadFile(filepath.Join(p.cfg.Dir, "nginx.log"))
			return fmt.Errorf("nginx not listening on %s within 20 s (%v): %s", addr, err, clip(string(b)))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Pids are the peer's processes: dnsmasq, nginx's master and its workers.
func (p *Peer) Pids() []int {
	pids := []int{p.dnsmasq.Process.Pid, p.nginx.Process.Pid}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.nginx.Process.Pid, p.nginx.Process.Pid))
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Stop ends both (nginx's master takes its workers with it on SIGTERM).
func (p *Peer) Stop() {
	for _, c := range []*exec.Cmd{p.nginx, p.dnsmasq} {
		if c != nil && c.Process != nil {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
		}
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
