//go:build e2e

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// agentBinary is $INGOT_AGENT_BIN, or a static build made for the test.
func agentBinary(t *testing.T) string {
	if p := os.Getenv("INGOT_AGENT_BIN"); p != "" {
		return p
	}
	p := filepath.Join(t.TempDir(), "ingot-agent")
	cmd := exec.Command("go", "build", "-o", p, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	return p
}

// TestE2EAgentPID1 boots the agent as PID 1 of a real initramfs in a QEMU VM
// (direct kernel boot, TCG) on a bridge in a namespace: it loads the virtio
// modules, gets an address from dnsmasq, fetches its task from a fake API
// server inside the namespace, writes the image to the VM's virtio disk,
// runs checks, reports done and reboots (QEMU exits: -no-reboot).
func TestE2EAgentPID1(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "dnsmasq")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()

	k, err := initramfs.FetchKernel(ctx, initramfs.CacheDir(os.Getenv), "auto")
	if err != nil {
		t.Fatalf("kernel: %v", err)
	}
	boot, err := initramfs.BuildKernelAndInitrd(ctx, k, initramfs.Spec{Agent: agentBinary(t), Modules: initramfs.DefaultModules}, filepath.Join(dir, "boot"))
	if err != nil {
		t.Fatalf("initramfs: %v", err)
	}

	ns := netnstest.New(t, "ingot-agent-e2e")
	if err := ns.AddBridge(ctx, "br0", "10.77.9.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := ns.AddTap(ctx, "tap0", "br0"); err != nil {
		t.Fatal(err)
	}
	dns := ns.Command(ctx, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--interface=br0", "--bind-interfaces",
		"--dhcp-range=10.77.9.50,10.77.9.60,255.255.255.0,1h", "--leasefile-ro", "--dhcp-authoritative")
	if err := ns.Start(dns); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", "10.77.9.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	raw, zst, sum := labImage(t)
	task := api.Task{MachineID: "m-e2e", Recipe: "lab-qemu", Mode: api.ModeProvision,
		Image:   api.Image{URL: "/images/lab.raw.zst", SHA256: sum, Format: api.FormatRawZstd, Size: int64(len(zst))},
		Disk:    recipe.DiskSpec{Boot: true, MinSize: 32 << 20},
		Checks:  []recipe.Check{{Name: "disk-present"}, {Name: "disk-health"}},
		Handoff: api.HandoffReboot}
	srv := newFakeServerOn(t, ln, task, zst)

	// The disk starts full of junk: zero runs the agent skips must still
	// read back as zeros (BLKZEROOUT), never as what was there before.
	disk := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(disk, bytes.Repeat([]byte{0xa5}, 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(dir, "console.log")
	qemu := ns.Command(ctx, "qemu-system-x86_64", "-accel", "tcg", "-smp", "1", "-m", "512", "-nographic", "-monitor", "none",
		"-serial", "file:"+console, "-no-reboot", "-kernel", boot.Vmlinuz, "-initrd", boot.Initrd,
		"-append", "console=ttyS0 panic=-1 ingot.server="+srv.URL+" ingot.token=tok-1 ingot.machine=m-e2e ingot.onerror=poweroff",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no", "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:77:09:10",
		"-drive", "file="+disk+",format=raw,if=virtio")
	if err := ns.Start(qemu); err != nil {
		t.Fatal(err)
	}
	err = qemu.Wait() // the agent reboots, QEMU exits (-no-reboot); or the context ends it
	log, _ := os.ReadFile(console)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("qemu: %v (ctx %v)\nconsole:\n%s", err, ctx.Err(), log)
	}
	for _, marker := range []string{"ingot-agent: network up iface=eth0", "ingot-agent: disk /dev/vda",
		"ingot-agent: image written sha256=" + sum, "ingot-agent: check disk-present ok", "ingot-agent: done handoff=reboot",
		"ingot-agent: handoff reboot"} {
		if !strings.Contains(string(log), marker) {
			t.Errorf("console lacks %q", marker)
		}
	}
	got, _ := os.ReadFile(disk)
	if len(got) < len(raw) || !bytes.Equal(got[:len(raw)], raw) {
		t.Errorf("the VM's disk does not hold the image")
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.done) != 1 || !srv.done[0].OK || srv.done[0].Disk != "/dev/vda" {
		t.Errorf("done posted: %+v", srv.done)
	}
	if t.Failed() {
		t.Logf("console:\n%s", log)
		return
	}
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "ingot-agent") || strings.Contains(l, "Run /init") {
			t.Log(l)
		}
	}
}
