//go:build integration

package serve

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// bootNS makes a namespace with a boot interface d0 = 10.80.0.1/24 (a
// bridge: the dummy module is not always available).
func bootNS(t *testing.T) *netns.NS {
	t.Helper()
	ns := netnstest.New(t, "serve")
	if err := ns.AddBridge(context.Background(), "d0", "10.80.0.1/24"); err != nil {
		t.Fatal(err)
	}
	return ns
}

func TestIntegrationServeProcess(t *testing.T) {
	netnstest.Need(t, "curl", "ss")
	bin := ingotBin(t)
	ns := bootNS(t)
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr syncBuf
	cmd := ns.Command(context.Background(), bin, "serve", "--interface", "d0", "--data", data,
		"--pool", "10.80.0.0/24,10.80.0.100-10.80.0.200", "--http-addr", "10.80.0.1:8080", "--api-addr", "10.80.0.1:8443", "--log-level", "debug")
	cmd.Stderr = &stderr
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("ingot serve stderr:\n%s", stderr.String())
		}
	}()

	up := false
	for i := 0; i < 100 && !up; i++ {
		select {
		case err := <-exited:
			t.Fatalf("ingot serve exited early: %v", err)
		default:
		}
		out, err := ns.Run(ctx, "curl", "-sf", "http://10.80.0.1:8080/healthz")
		up = err == nil && string(out) == "ok\n"
		if !up {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !up {
		t.Fatal("/healthz did not answer ok within 20s")
	}
	// TFTP: the Debian iPXE binary, bound to the interface address only.
	if fileExists("/usr/lib/ipxe/undionly.kpxe") {
		got, err := ns.Run(ctx, "curl", "-sSf", "--tftp-blksize", "1468", "tftp://10.80.0.1/undionly.kpxe")
		want, _ := os.ReadFile("/usr/lib/ipxe/undionly.kpxe")
		if err != nil || sha256.Sum256(got) != sha256.Sum256(want) {
			t.Errorf("tftp undionly.kpxe: %v, %d bytes, want %d", err, len(got), len(want))
		}
	}
	// HTTP boot clients get ipxe.efi over HTTP; on Debian it is a symlink
	// into /boot, allowed by --boot-link-targets' default.
	if want, err := os.ReadFile("/usr/lib/ipxe/ipxe.efi"); err == nil {
		got, err := ns.Run(ctx, "curl", "-sSf", "http://10.80.0.1:8080/boot/ipxe.efi")
		if err != nil || sha256.Sum256(got) != sha256.Sum256(want) {
			t.Errorf("/boot/ipxe.efi: %v, %d bytes, want %d", err, len(got), len(want))
		}
	}
	socks, _ := ns.Run(ctx, "ss", "-Hluna")
	if !strings.Contains(string(socks), "10.80.0.1:69 ") {
		t.Errorf("TFTP not bound to 10.80.0.1:69:\n%s", socks)
	}
	if strings.Contains(string(socks), "0.0.0.0:69 ") {
		t.Errorf("TFTP bound to the wildcard address:\n%s", socks)
	}
	script, _ := ns.Run(ctx, "curl", "-sS", "http://10.80.0.1:8080/ipxe?mac=52:54:00:aa:bb:cc&arch=bios")
	if !strings.HasPrefix(string(script), "#!ipxe\n") {
		t.Errorf("/ipxe did not answer a script: %q", script)
	}
	cliWhileServing(ctx, t, ns, bin, data)
	metrics, _ := ns.Run(ctx, "curl", "-sS", "--cacert", data+"/tls/ca.pem", "https://10.80.0.1:8443/metrics")
	for _, want := range []string{`ingot_tftp_transfers_total{result="ok"} 1`, `ingot_http_requests_total{code="200",route="ipxe"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("ingot serve after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ingot serve still running 30s after SIGTERM")
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(stderr.String(), "msg=\"router advertisements\"") {
		t.Errorf("router advertisement responder not started:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "ingot stopped") {
		t.Errorf("no graceful stop logged:\n%s", stderr.String())
	}
}

// cliWhileServing runs the operator CLI (the real binary) against the
// server while its DHCP serves the namespace: the CLI is an API client,
// and the token is the one the first start wrote into the data folder.
func cliWhileServing(ctx context.Context, t *testing.T, ns *netns.NS, bin, data string) {
	t.Helper()
	conn := []string{"--server", "https://10.80.0.1:8443", "--ca", data + "/tls/ca.pem", "--token-file", data + "/admin.token"}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01", "--rack", "r1"}, "enrolled gpu-01"},
		{[]string{"machine", "ls"}, "gpu-01"},
		{[]string{"machine", "show", "gpu-01", "-o", "yaml"}, "name: gpu-01"},
		{[]string{"events", "gpu-01"}, "enrolled"},
		{[]string{"inventory", "show", "gpu-01", "--history"}, "no inventory for gpu-01"},
		{[]string{"token", "ls"}, "admin"},
		{[]string{"job", "ls", "-o", "json"}, "[]"},
		{[]string{"image", "ls"}, "NAME"},
		{[]string{"machine", "rm", "gpu-01"}, "removed gpu-01"},
	}
	for _, st := range steps {
		out, err := ns.Run(ctx, bin, append(st.args, conn...)...)
		if err != nil || !strings.Contains(string(out), st.want) {
			t.Errorf("ingot %s while DHCP serves: %v\n%s\nwant %q", strings.Join(st.args, " "), err, out, st.want)
		}
	}
	// The offline mode refuses the database the running server holds.
	out, err := ns.Run(ctx, bin, "admin", "machine", "ls", "--db", data+"/ingot.db")
	if err == nil || !strings.Contains(string(out), "held by a running ingot server") {
		t.Errorf("ingot admin on the server's database: %v\n%s", err, out)
	}
}

func TestIntegrationServeRefusals(t *testing.T) {
	netnstest.Need(t)
	bin := ingotBin(t)
	ns := bootNS(t)
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tests := map[string]struct {
		args []string
		want string
	}{
		"dhcp without interface":  {[]string{"--data", data}, "needs --interface"},
		"proxy without interface": {[]string{"--data", data, "--dhcp", "proxy"}, "needs --interface"},
		"server ip of another interface": {[]string{"--data", data, "--interface", "d0", "--dhcp", "proxy",
			"--server-ip", "10.81.0.1", "--http-addr", "127.0.0.1:0"}, "not an address of interface d0"},
		"interface missing": {[]string{"--data", data, "--interface", "nope0", "--dhcp", "proxy", "--http-addr", "127.0.0.1:0"}, "nope0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := ns.Command(ctx, bin, append([]string{"serve"}, tc.args...)...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("ingot serve %v: %v, want a non-zero exit\n%s", tc.args, err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("message %q lacks %q", out, tc.want)
			}
		})
	}
}
