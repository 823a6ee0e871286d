package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The lab's store: by default serve's embedded bbolt file (DIR/data/ingot.db).
// Config.Store "etcd" runs a one-member etcd (Debian's etcd-server) inside
// the lab's namespace, its data in DIR/etcd, and serve keeps every record
// there: the path a VM takes is the same, only the store differs. An
// etcd:// URL names a cluster of the operator's instead; it must be
// reachable from inside the namespace (the lab routes nothing out of it).
const (
	StoreEtcd   = "etcd"
	etcdClient  = "http://127.0.0.1:2379"
	etcdPeer    = "http://127.0.0.1:2380"
	etcdPrefix  = "ingot-lab"
	etcdWaitFor = 60 * time.Second
)

// EtcdURL is the store URL serve gets when the lab runs its own etcd.
const EtcdURL = "etcd://127.0.0.1:2379/" + etcdPrefix

func validStore(s string) error {
	switch {
	case s == "", s == "bolt", s == StoreEtcd, strings.HasPrefix(s, "etcd://"):
		return nil
	}
	return fmt.Errorf("lab store %q: expected bolt (the embedded default), etcd (a one-member etcd in the lab's namespace) or an etcd:// URL reachable from inside the namespace", s)
}

// storeArgs starts the lab's etcd when Config.Store asks for one, and
// returns serve's store flags (none: the embedded default).
func (l *Lab) storeArgs(ctx context.Context) ([]string, error) {
	switch s := l.cfg.Store; {
	case s == "" || s == "bolt":
		return nil, nil
	case s != StoreEtcd:
		// The lab clears what it owns (DIR/etcd for its own member), not
		// a cluster of the operator's.
		fmt.Fprintf(l.cfg.Out, "lab: ingot keeps its records at %s as they are: what an earlier lab left under that prefix stays (give a fresh prefix for a lab from nothing)\n", s)
		return []string{"--db", s}, nil
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("lab store etcd: %w (apt-get install etcd-server)", err)
	}
	// Heartbeat and election raised as in the tests' clusters: etcd's
	// defaults lose the leader when QEMU's TCG shares two cores.
	if _, err := l.spawnProgram("etcd", bin, "--name", "lab", "--data-dir", filepath.Join(l.cfg.Dir, "etcd"),
		"--listen-client-urls", etcdClient, "--advertise-client-urls", etcdClient,
		"--listen-peer-urls", etcdPeer, "--initial-advertise-peer-urls", etcdPeer,
		"--initial-cluster", "lab="+etcdPeer, "--initial-cluster-state", "new",
		"--heartbeat-interval", "250", "--election-timeout", "2500"); err != nil {
		return nil, err
	}
	if err := waitEtcdHealthy(ctx, l.HTTP, etcdClient+"/health", etcdWaitFor); err != nil {
		return nil, fmt.Errorf("the lab's etcd (see %s): %w", filepath.Join(l.cfg.Dir, "etcd.log"), err)
	}
	fmt.Fprintf(l.cfg.Out, "lab: ingot keeps its records in etcd (%s, one member inside the lab's namespace, data in %s)\n",
		EtcdURL, filepath.Join(l.cfg.Dir, "etcd"))
	return []string{"--db", EtcdURL}, nil
}

// waitEtcdHealthy polls etcd's /health until it says {"health":"true"}.
func waitEtcdHealthy(ctx context.Context, c *http.Client, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := c.Do(req); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"health":"true"`) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy within %s at %s: %s", within, url, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
