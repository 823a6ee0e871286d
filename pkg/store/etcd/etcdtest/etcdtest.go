// Package etcdtest starts real etcd clusters for tests: Debian's
// etcd-server (3.4) on loopback, one data directory per member under the
// test's temporary directory, random free ports, stopped when the test
// ends. Timeouts are raised for a loaded 2-core machine (heartbeat 250ms,
// election 2.5s: etcd's defaults of 100ms and 1s lose their leader when
// the race detector and a QEMU test share the cores). Members can be
// stopped, killed and started again, for failure tests.
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// Binary is the etcd server the clusters run (Debian's etcd-server).
const Binary = "etcd"

// Need skips the test unless etcd is on PATH, or fails it in CI
// (netnstest.RequireAll), where .ci/deps installs etcd-server.
func Need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(Binary); err != nil {
		if netnstest.RequireAll() {
			t.Fatalf("needs %s on PATH (required in CI; run 'make deps' as root: Debian's etcd-server)", Binary)
		}
		t.Skipf("needs %s on PATH (Debian's etcd-server)", Binary)
	}
}

// Options tune a cluster. The zero value is what tests want.
type Options struct {
	// HeartbeatMS and ElectionMS are etcd's --heartbeat-interval and
	// --election-timeout (default 250 and 2500).
	HeartbeatMS, ElectionMS int
	// QuotaBytes is --quota-backend-bytes (default etcd's 2 GiB).
	QuotaBytes int64
	// TLS, when set, makes the members serve clients over TLS with its
	// server certificate and require client certificates signed by its CA
	// (peers stay on plain HTTP, on loopback).
	TLS *TLS
	// Args are more flags for every member.
	Args []string
}

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	opts    Options
	Members []*Member
}

// Member is one etcd process of a cluster.
type Member struct {
	Name      string
	ClientURL string // http://127.0.0.1:port (https with Options.TLS)
	PeerURL   string
	Dir       string // data directory
	logPath   string
	initial   string // --initial-cluster

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Single starts a one-member cluster: quick, for tests that need a real
// etcd but not its consensus.
func Single(t testing.TB) *Cluster { return Start(t, 1, Options{}) }

// Three starts a three-member cluster: what a site runs, and the smallest
// that survives the loss of a member.
func Three(t testing.TB) *Cluster { return Start(t, 3, Options{}) }

// Start starts an n-member cluster, waits until every member is healthy
// and a write commits, and stops it when t ends (its logs printed if t
// failed).
func Start(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	Need(t)
	if opts.HeartbeatMS == 0 {
		opts.HeartbeatMS = 250
	}
	if opts.ElectionMS == 0 {
		opts.ElectionMS = 2500
	}
	c := &Cluster{t: t, opts: opts}
	dir := t.TempDir()
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	var initial []string
	scheme := "http://"
	if opts.TLS != nil {
		scheme = "https://"
	}
	for i := range n {
		m := &Member{Name: fmt.Sprintf("m%d", i+1),
			ClientURL: scheme + "127.0.0.1:" + strconv.Itoa(ports[2*i]),
			PeerURL:   "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
			Dir:       filepath.Join(dir, fmt.Sprintf("m%d.etcd", i+1)),
			logPath:   filepath.Join(dir, fmt.Sprintf("m%d.log", i+1))}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	t.Cleanup(c.stopAll)
	token := fmt.Sprintf("ingot-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range c.Members {
		m.initial = strings.Join(initial, ",")
		if err := c.start(m, token); err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("etcdtest: %d-member cluster not healthy: %v\n%s", n, err, c.Logs())
	}
	return c
}

// freePorts returns n distinct ports free on 127.0.0.1 now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// args are member m's flags. token is set for a new cluster; a member
// started again on its data directory ignores the initial-cluster flags.
func (c *Cluster) args(m *Member, token string) []string {
	a := []string{"--name", m.Name, "--data-dir", m.Dir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", m.initial, "--initial-cluster-state", "new",
		"--heartbeat-interval", strconv.Itoa(c.opts.HeartbeatMS),
		"--election-timeout", strconv.Itoa(c.opts.ElectionMS),
		"--logger", "zap", "--log-level", "warn"}
	if token != "" {
		a = append(a, "--initial-cluster-token", token)
	}
	if t := c.opts.TLS; t != nil {
		a = append(a, "--cert-file", t.ServerCert, "--key-file", t.ServerKey, "--trusted-ca-file", t.CACert, "--client-cert-auth")
	}
	if c.opts.QuotaBytes > 0 {
		a = append(a, "--quota-backend-bytes", strconv.FormatInt(c.opts.QuotaBytes, 10))
	}
	return append(a, c.opts.Args...)
}

// start runs member m's process.
func (c *Cluster) start(m *Member, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return fmt.Errorf("member %s is running", m.Name)
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(Binary, c.args(m, token)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The member dies with the test binary, even one killed by a timeout
	// (and not before: see StartProcess).
	if err := StartProcess(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("starting etcd member %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.cmd, m.done = cmd, done
	return nil
}

// Endpoints are the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// URL is the etcd:// store URL of the cluster with key prefix prefix
// ("site-a" or "a/b").
func (c *Cluster) URL(prefix string) string {
	var hosts []string
	for _, ep := range c.Endpoints() {
		hosts = append(hosts, strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://"))
	}
	return "etcd://" + strings.Join(hosts, ",") + "/" + prefix
}

// Client is a client of every member, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(c.clientConfig(c.Endpoints(), 10*time.Second))
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// clientConfig is a client of endpoints (with the client certificate when
// the cluster has TLS).
func (c *Cluster) clientConfig(endpoints []string, dial time.Duration) clientv3.Config {
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: dial, Logger: zap.NewNop()}
	if c.opts.TLS != nil {
		cc.TLS = c.opts.TLS.Client.Clone()
	}
	return cc
}

// WaitHealthy waits until every running member answers its status with a
// leader, and a write through every running member commits.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = c.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		cli, err := clientv3.New(c.clientConfig([]string{m.ClientURL}, 2*time.Second))
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
		err = func() error {
			defer cli.Close()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := cli.Status(rctx, m.ClientURL)
			if err != nil {
				return err
			}
			if st.Leader == 0 {
				return fmt.Errorf("no leader")
			}
			_, err = cli.Put(rctx, "/etcdtest/health", m.Name)
			return err
		}()
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
	}
	return nil
}

// Running reports whether the member's process runs.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Stop stops member i (SIGTERM: etcd shuts down cleanly) and waits for it.
func (c *Cluster) Stop(i int) { c.signal(i, syscall.SIGTERM) }

// Kill kills member i (SIGKILL: what a crash or a power cut leaves).
func (c *Cluster) Kill(i int) { c.signal(i, syscall.SIGKILL) }

func (c *Cluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	m := c.Members[i]
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Restart starts member i again on its data directory (after Stop or
// Kill) and waits until the cluster is healthy.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if err := c.start(c.Members[i], ""); err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.t.Fatalf("etcdtest: member %s back, cluster not healthy: %v\n%s", c.Members[i].Name, err, c.Logs())
	}
}

// RestartAll starts every stopped member again on its data directory
// (after a Kill of them all: a power cut) and waits until the cluster is
// healthy.
func (c *Cluster) RestartAll() {
	c.t.Helper()
	for _, m := range c.Members {
		if m.Running() {
			continue
		}
		if err := c.start(m, ""); err != nil {
			c.t.Fatalf("etcdtest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.t.Fatalf("etcdtest: cluster not healthy after a restart of every member: %v\n%s", err, c.Logs())
	}
}

// Logs returns the tail of every member's log.
func (c *Cluster) Logs() string {
	var b bytes.Buffer
	for _, m := range c.Members {
		raw, _ := os.ReadFile(m.logPath)
		if len(raw) > 4000 {
			raw = raw[len(raw)-4000:]
		}
		fmt.Fprintf(&b, "--- etcd member %s (%s) log tail:\n%s\n", m.Name, m.ClientURL, raw)
	}
	return b.String()
}

// stopAll stops every member, printing their logs if the test failed.
func (c *Cluster) stopAll() {
	if c.t.Failed() {
		c.t.Log(c.Logs())
	}
	var wg sync.WaitGroup
	for i := range c.Members {
		wg.Go(func() { c.Stop(i) })
	}
	wg.Wait()
}

// Leader is the index of the member that leads the cluster now (-1 when
// no running member names one).
func (c *Cluster) Leader(ctx context.Context) int {
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		cli, err := clientv3.New(c.clientConfig([]string{m.ClientURL}, 2*time.Second))
		if err != nil {
			continue
		}
		st, err := cli.Status(ctx, m.ClientURL)
		cli.Close()
		if err != nil || st.Leader == 0 {
			continue
		}
		if st.Leader == st.Header.MemberId {
			for i := range c.Members {
				if c.Members[i] == m {
					return i
				}
			}
		}
	}
	return -1
}

// Pid is the member's process ID (0 when it does not run).
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}
