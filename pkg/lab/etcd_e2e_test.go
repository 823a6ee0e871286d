//go:build e2e

package lab_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// The lab on etcd: ingot serve keeps its records in a one-member etcd the
// lab runs inside its namespace (Debian's etcd-server), not in its bbolt
// file. A BIOS VM network-boots through ingot's own DHCP to ready; its
// machine, its DHCP lease and its job are keys under the lab's prefix, no
// bbolt file was made, and serve, killed and started again, reads the VM
// back as ready from etcd.
func TestE2ELabEtcd(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "busybox", "etcd", "etcdctl")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := upLab(t, ctx, lab.Config{Prefix: "ingot-etcd", VMs: []lab.VMSpec{{Firmware: "bios"}}, Store: lab.StoreEtcd})
	if args := strings.Join(l.State.ServeArgs, " "); !strings.Contains(args, "--db "+lab.EtcdURL) {
		t.Fatalf("serve runs with %q, want --db %s", args, lab.EtcdURL)
	}
	vm := l.State.VMs[0]
	res, err := l.Reimage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	requireReady(t, ctx, l, res[0])
	t.Logf("provision on etcd: %s", res[0].Restore())
	m, err := l.Machine(ctx, vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.State.Dir, "data", "ingot.db")); err == nil {
		t.Errorf("serve made a bbolt file beside its etcd store")
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.State.Namespace, "etcdctl",
		"--endpoints", "http://127.0.0.1:2379", "get", "--prefix", "--keys-only", "/ingot-lab/").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl get in the lab's namespace: %v\n%s", err, out)
	}
	keys := string(out)
	for _, want := range []string{"/ingot-lab/m/" + m.ID, "/ingot-lab/l/" + vm.MAC, "/ingot-lab/j/" + res[0].Job.ID} {
		if !strings.Contains(keys, want+"\n") {
			t.Errorf("etcd holds no key %s; its keys:\n%s", want, keys)
		}
	}
	if err := l.KillServe(); err != nil {
		t.Fatal(err)
	}
	if err := l.StartServe(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := l.Machine(ctx, vm.Name); err != nil || m.State != machine.StateReady {
		t.Fatalf("after serve restarted on etcd, %s is %+v, %v; want ready", vm.Name, m, err)
	}
}
