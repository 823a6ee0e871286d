//go:build integration

// These tests run `ingot serve` as the unit does and check what runServe
// wires: checkPrivileges before anything is opened, and systemdReady once
// every listener is bound.

package deb

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// installedRoot is a fresh root with the package installed and configured
// to serve DHCP and TFTP on d0.
func installedRoot(t *testing.T) string {
	t.Helper()
	root := freshRoot(t)
	installDeb(t, root, builtDebs(t)["amd64"])
	configure(t, root)
	return root
}

// Without CAP_NET_RAW, serve (with --ra, the default) refuses to start and
// says which capability it lacks and why, before it binds anything.
func TestIntegrationServeRefusesWithoutNetRaw(t *testing.T) {
	netnstest.Need(t, "mmdebstrap", "chroot", "mount", "setpriv", "make", "git")
	root := installedRoot(t)
	srv, _ := bootNetwork(t)
	u := readUnit(t, filepath.Join(root, "lib/systemd/system/ingot.service"))
	u.Caps = slices.DeleteFunc(u.Caps, func(c string) bool { return c == "CAP_NET_RAW" })
	u.Bounding = slices.DeleteFunc(u.Bounding, func(c string) bool { return c == "CAP_NET_RAW" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serve, stderr := startAsUnit(ctx, t, srv, root, u, nil)
	err := serve.Wait()
	out, _ := os.ReadFile(stderr.Name())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 78 || ctx.Err() != nil {
		t.Fatalf("serve without CAP_NET_RAW: %v (context %v), want a refusal with exit status 78 (the unit's RestartPreventExitStatus)\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{"router advertisements on d0 open a raw ICMPv6 socket (--ra): needs CAP_NET_RAW", "with capabilities CAP_NET_BIND_SERVICE"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("refusal lacks %q:\n%s", want, out)
		}
	}
}

// Under Type=notify serve sends READY=1 once its listeners answer,
// RELOADING=1 and READY=1 around SIGHUP, STOPPING=1 at SIGTERM.
func TestIntegrationServeNotifiesSystemd(t *testing.T) {
	netnstest.Need(t, "mmdebstrap", "chroot", "mount", "setpriv", "curl", "make", "git")
	root := installedRoot(t)
	srv, cli := bootNetwork(t)
	sock := filepath.Join(root, "run/ingot-notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	os.Chmod(sock, 0o666)
	next := func(want string) string {
		t.Helper()
		buf := make([]byte, 4096)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := c.Read(buf)
		if err != nil || !strings.HasPrefix(string(buf[:n]), want) {
			t.Fatalf("notification %q (%v), want %q first", buf[:n], err, want)
		}
		return string(buf[:n])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u := readUnit(t, filepath.Join(root, "lib/systemd/system/ingot.service"))
	serve, _ := startAsUnit(ctx, t, srv, root, u, []string{"NOTIFY_SOCKET=/run/ingot-notify"})
	ready := next("READY=1\n")
	if !strings.Contains(ready, "STATUS=serving: boot http [::]:8080, api [::]:8443, tftp 10.80.0.1:69") {
		t.Errorf("status line %q", ready)
	}
	if out, err := cli.Run(ctx, "sh", "-c", "ip addr add 10.80.0.9/24 dev eth0 && curl -sSf http://10.80.0.1:8080/healthz"); err != nil {
		t.Errorf("READY=1 came before the boot listener answered: %v %s", err, out)
	}
	serve.Process.Signal(syscall.SIGHUP)
	next("RELOADING=1\nMONOTONIC_USEC=")
	next("READY=1")
	serve.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if err := serve.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
}
