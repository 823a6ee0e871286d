// Package netns creates the isolated networks ingot's tests, benchmarks and
// lab run in: Linux network namespaces with bridges, veth pairs and taps.
// Nothing here touches the host's own interfaces; every address configured
// lives inside a namespace this package made, and Close removes it.
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// NS is one network namespace made by New.
type NS struct {
	Name string

	mu    sync.Mutex
	procs []*exec.Cmd
}

// New creates a namespace named prefix-<random> with loopback up.
func New(ctx context.Context, prefix string) (*NS, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	n := &NS{Name: fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(b[:]))}
	if err := ip(ctx, "netns", "add", n.Name); err != nil {
		return nil, err
	}
	if err := n.IP(ctx, "link", "set", "lo", "up"); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Open refers to an existing namespace by name (made by `ingot lab up`).
func Open(name string) (*NS, error) {
	if _, err := os.Stat("/var/run/netns/" + name); err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", name, err)
	}
	return &NS{Name: name}, nil
}

// IP runs `ip -n NAME args...`.
func (n *NS) IP(ctx context.Context, args ...string) error {
	return ip(ctx, append([]string{"-n", n.Name}, args...)...)
}

// AddBridge creates bridge br with the address cidr (e.g. 10.77.0.1/24) and
// brings it up. STP and forward delay are off so ports forward at once.
func (n *NS) AddBridge(ctx context.Context, br, cidr string) error {
	steps := [][]string{
		{"link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{"link", "set", br, "up"},
	}
	if cidr != "" {
		steps = append(steps, []string{"addr", "add", cidr, "dev", br})
	}
	return n.ipAll(ctx, steps)
}

// AddTap creates a tap device attached to bridge br, for a QEMU NIC.
func (n *NS) AddTap(ctx context.Context, tap, br string) error {
	return n.ipAll(ctx, [][]string{
		{"tuntap", "add", "dev", tap, "mode", "tap"},
		{"link", "set", tap, "master", br},
		{"link", "set", tap, "up"},
	})
}

// Veth links namespace a (interface aIf, address aCIDR) to namespace b
// (interface bIf, address bCIDR). An empty CIDR leaves that end unnumbered;
// a bridge name after a '@' in bIf (eth1@br0) attaches that end to a bridge.
func Veth(ctx context.Context, a *NS, aIf, aCIDR string, b *NS, bIf, bCIDR string) error {
	bName, bBridge, _ := strings.Cut(bIf, "@")
	tmp := "vt" + hex.EncodeToString([]byte(a.Name[len(a.Name)-3:]))
	if err := a.IP(ctx, "link", "add", aIf, "type", "veth", "peer", "name", tmp); err != nil {
		return err
	}
	if err := a.IP(ctx, "link", "set", tmp, "netns", b.Name); err != nil {
		return err
	}
	if err := b.IP(ctx, "link", "set", tmp, "name", bName); err != nil {
		return err
	}
	for _, end := range []struct {
		ns      *NS
		ifc, ad string
		br      string
	}{{a, aIf, aCIDR, ""}, {b, bName, bCIDR, bBridge}} {
		if end.ad != "" {
			if err := end.ns.IP(ctx, "addr", "add", end.ad, "dev", end.ifc); err != nil {
				return err
			}
		}
		if end.br != "" {
			if err := end.ns.IP(ctx, "link", "set", end.ifc, "master", end.br); err != nil {
				return err
			}
		}
		if err := end.ns.IP(ctx, "link", "set", end.ifc, "up"); err != nil {
			return err
		}
	}
	return nil
}

// Command returns a command that runs inside the namespace. Start it with
// n.Start so Close kills it.
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Start starts cmd and remembers it so Close can kill it.
func (n *NS) Start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s in %s: %w", cmd.Args, n.Name, err)
	}
	n.mu.Lock()
	n.procs = append(n.procs, cmd)
	n.mu.Unlock()
	return nil
}

// Run runs a command in the namespace and returns its combined output.
func (n *NS) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := n.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), n.Name, err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Do runs fn on an OS thread that has entered the namespace. Sockets fn opens
// belong to the namespace for their whole life, wherever they are used later,
// so an in-process server can listen inside the namespace. The thread is
// discarded afterwards (never returned to Go's pool).
func (n *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		f, err := os.Open("/var/run/netns/" + n.Name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", n.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// DialContext opens a connection from inside the namespace (an
// http.Transport's DialContext): the socket is made on a thread that has
// entered it, as Do does, and is used from anywhere afterwards.
func (n *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Close kills the processes started with Start and deletes the namespace,
// which removes every interface in it.
func (n *NS) Close() error {
	n.mu.Lock()
	for _, c := range n.procs {
		if c.Process != nil {
			_ = c.Process.Kill()
			_, _ = c.Process.Wait()
		}
	}
	n.procs = nil
	n.mu.Unlock()
	// Processes started some other way may still hold the namespace: kill them.
	if out, err := exec.Command("ip", "netns", "pids", n.Name).Output(); err == nil {
		self := fmt.Sprint(os.Getpid())
		for _, pid := range strings.Fields(string(out)) {
			if pid == self { // our own threads may have entered it through Do
				continue
			}
			_ = exec.Command("kill", "-9", pid).Run()
		}
	}
	return ip(context.Background(), "netns", "del", n.Name)
}

func (n *NS) ipAll(ctx context.Context, steps [][]string) error {
	for _, s := range steps {
		if err := n.IP(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
