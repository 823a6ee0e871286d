//go:build e2e

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// kexecImage builds a GPT disk image whose ext4 partition holds /boot with
// the given kernel and initrd and Debian's /vmlinuz and /initrd.img links,
// without loop devices or mounts (mkfs.ext4 -d, sfdisk, dd).
func kexecImage(t *testing.T, dir, kernel, initrd string) []byte {
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "boot"), 0o755)
	for src, dst := range map[string]string{kernel: "boot/vmlinuz-test", initrd: "boot/initrd.img-test"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(root, dst), b, 0o644)
	}
	os.MkdirAll(filepath.Join(root, "etc/ingot"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("PRETTY_NAME=\"kexec test\"\n"), 0o644)
	os.Symlink("boot/vmlinuz-test", filepath.Join(root, "vmlinuz"))
	os.Symlink("boot/initrd.img-test", filepath.Join(root, "initrd.img"))
	part := filepath.Join(dir, "part.img")
	disk := filepath.Join(dir, "image.raw")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("mkfs.ext4", "-q", "-F", "-d", root, part, "40M")
	run("truncate", "-s", "48M", disk)
	sf := exec.Command("sfdisk", "-q", disk)
	sf.Stdin = strings.NewReader("label: gpt\nstart=2048, size=81920, type=linux\n")
	if out, err := sf.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
	run("dd", "if="+part, "of="+disk, "bs=1M", "seek=1", "conv=notrunc", "status=none")
	raw, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestE2EAgentKexec provisions a VM with an image holding a kernel and
// initrd (the agent's own), hands off with kexec, and checks the kexec'd
// kernel started with root= and the first-boot keys, never the agent's
// credential; the agent wrote the first-boot secret into the installed root
// partition on the VM's disk. The second boot runs the agent binary in
// place of an installed OS: holding no credential, it refuses and powers off.
func TestE2EAgentKexec(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "dnsmasq", "mkfs.ext4", "sfdisk")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	k, err := initramfs.FetchKernel(ctx, initramfs.CacheDir(os.Getenv), "auto")
	if err != nil {
		t.Fatalf("kernel: %v", err)
	}
	// ext4 with metadata_csum needs crc32c, a soft dependency .modinfo's
	// depends= does not list.
	mods := append(append([]string(nil), initramfs.DefaultModules...), "crc32c_generic")
	boot, err := initramfs.BuildKernelAndInitrd(ctx, k, initramfs.Spec{Agent: agentBinary(t), Modules: mods}, filepath.Join(dir, "boot"))
	if err != nil {
		t.Fatalf("initramfs: %v", err)
	}
	raw := kexecImage(t, dir, boot.Vmlinuz, boot.Initrd)
	enc, _ := zstd.NewWriter(nil)
	zst := enc.EncodeAll(raw, nil)
	s := sha256.Sum256(zst)

	ns := netnstest.New(t, "ingot-kexec-e2e")
	if err := ns.AddBridge(ctx, "br0", "10.77.8.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := ns.AddTap(ctx, "tap0", "br0"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(ns.Command(ctx, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--interface=br0",
		"--bind-interfaces", "--dhcp-range=10.77.8.50,10.77.8.60,255.255.255.0,1h", "--leasefile-ro", "--dhcp-authoritative")); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", "10.77.8.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	task := api.Task{MachineID: "m-kx", Mode: api.ModeProvision, Handoff: api.HandoffKexec, Cmdline: "console=ttyS0 panic=-1 ingot.onerror=poweroff",
		Image:           api.Image{URL: "/images/lab.raw.zst", SHA256: hex.EncodeToString(s[:]), Format: api.FormatRawZstd},
		FirstBootSecret: "mf_kexec_e2e"}
	srv := newFakeServerOn(t, ln, task, zst)

	disk := filepath.Join(dir, "disk.raw")
	os.WriteFile(disk, nil, 0o644)
	os.Truncate(disk, 64<<20)
	console := filepath.Join(dir, "console.log")
	qemu := ns.Command(ctx, "qemu-system-x86_64", "-accel", "tcg", "-smp", "1", "-m", "768", "-nographic", "-monitor", "none",
		"-serial", "file:"+console, "-no-reboot", "-kernel", boot.Vmlinuz, "-initrd", boot.Initrd,
		"-append", "console=ttyS0 panic=-1 ingot.server="+srv.URL+" ingot.token=tok-1 ingot.machine=m-kx ingot.onerror=poweroff",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no", "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:77:08:10",
		"-drive", "file="+disk+",format=raw,if=virtio")
	if err := ns.Start(qemu); err != nil {
		t.Fatal(err)
	}
	err = qemu.Wait()
	log, _ := os.ReadFile(console)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("qemu: %v (ctx %v)\nconsole:\n%s", err, ctx.Err(), log)
	}
	con := string(log)
	for _, marker := range []string{"ingot-agent: handoff kexec", "Command line: root=/dev/vda1 ro console=ttyS0",
		"ingot.firstboot=mf_kexec_e2e", "ingot-agent: fatal: ingot.token is missing", "ingot-agent: powering off"} {
		if !strings.Contains(con, marker) {
			t.Errorf("console lacks %q", marker)
		}
	}
	if i := strings.LastIndex(con, "Command line: root="); i >= 0 && strings.Contains(con[i:strings.Index(con[i:], "\n")+i], "ingot.token=") {
		t.Errorf("the kexec'd kernel got the agent's credential on its command line")
	}
	if n := strings.Count(con, "Run /init as init process"); n != 2 {
		t.Errorf("the agent's initramfs started %d times, want 2 (before and after kexec)", n)
	}
	got, _ := os.ReadFile(disk)
	if !bytes.Equal(got[:1<<20], raw[:1<<20]) {
		t.Errorf("the VM's disk does not hold the image's partition table")
	}
	part := filepath.Join(dir, "written.ext4")
	os.WriteFile(part, got[1<<20:41<<20], 0o644)
	if out, err := exec.Command("debugfs", "-R", "cat /etc/ingot/firstboot.env", part).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "INGOT_FIRSTBOOT=mf_kexec_e2e") {
		t.Errorf("the installed root holds no first-boot secret: %v\n%s", err, out)
	}
	if t.Failed() {
		t.Logf("console:\n%s", log)
	}
}
