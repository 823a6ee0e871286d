//go:build e2e

package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestE2ELabImageBoots boots the lab image from its disk under SeaBIOS
// (syslinux) and OVMF (the UKI), each in QEMU (TCG) with user-mode
// networking inside a fresh network namespace, and checks the console
// marker and the first-boot report: the test writes into the image's root
// partition what ingot's agent writes there (/etc/ingot/firstboot.env with
// the server 10.0.2.2:8080 and a first-boot secret, /etc/hostname); QEMU
// forwards 10.0.2.2:8080 to 127.0.0.1:8080 of the namespace, where this test
// listens and checks the report presents the secret. The image is built once into the shared cache
// (BuildCached: INGOT_CACHE/images/lab-<inputs digest>).
func TestE2ELabImageBoots(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "mkfs.vfat", "mcopy", "mkfs.ext4", "debugfs", "sfdisk", "objcopy", "syslinux")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s, err := Load(filepath.Join(repoRoot(t), "images", "lab"))
	if err != nil {
		t.Fatal(err)
	}
	cache := initramfs.CacheDir(os.Getenv)
	res, err := BuildCached(ctx, s, Options{Cache: cache, Pool: CachePool(cache)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lab image %s (raw.zst sha256 %s)", res.Raw, res.ZstSHA256)
	for _, fw := range []string{"bios", "uefi"} {
		t.Run(fw, func(t *testing.T) { bootLab(ctx, t, res.Raw, fw) })
	}
}

// asAgentLeftIt copies the raw image into dir and writes into its root
// partition (ext4 at 49 MiB, 8 MiB: the lab image's layout) the files
// ingot's agent writes after the image: the first-boot settings and the
// host name. debugfs edits the file system without mounting it.
func asAgentLeftIt(t *testing.T, raw, dir, env, hostname string) string {
	t.Helper()
	img := filepath.Join(dir, "disk.raw")
	root := filepath.Join(dir, "root.ext4")
	for _, f := range []struct{ name, body string }{{"firstboot.env", env}, {"hostname", hostname + "\n"}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmds := fmt.Sprintf("cd /etc/ingot\nwrite %s firstboot.env\ncd /etc\nwrite %s hostname\n",
		filepath.Join(dir, "firstboot.env"), filepath.Join(dir, "hostname"))
	for _, c := range [][]string{
		{"cp", raw, img},
		{"dd", "if=" + img, "of=" + root, "bs=1M", "skip=49", "count=8", "status=none"},
		{"debugfs", "-w", "-f", filepath.Join(dir, "debugfs.cmds"), root},
		{"dd", "if=" + root, "of=" + img, "bs=1M", "seek=49", "conv=notrunc", "status=none"},
	} {
		if c[0] == "debugfs" {
			if err := os.WriteFile(c[3], []byte(cmds), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	return img
}

func bootLab(ctx context.Context, t *testing.T, raw, fw string) {
	ns := netnstest.New(t, "ingot-labimg")
	reports := make(chan string, 4)
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reports <- r.Method + " " + r.URL.String() + " " + r.Header.Get("Authorization") + " " + string(b)
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	dir := t.TempDir()
	console := filepath.Join(dir, "console.log")
	mac := "52:54:00:12:34:" + map[string]string{"bios": "01", "uefi": "02"}[fw]
	secret := "mf_lab_image_test_" + fw
	raw = asAgentLeftIt(t, raw, dir, "INGOT_SERVER=http://10.0.2.2:8080\nINGOT_MACHINE=m-1\nINGOT_FIRSTBOOT="+secret+"\n", "lab-07")
	args := []string{"-accel", "tcg", "-smp", "1", "-m", "512", "-nographic", "-monitor", "none", "-no-reboot",
		"-serial", "file:" + console,
		"-drive", "file=" + raw + ",format=raw,if=virtio,snapshot=on",
		"-nic", "user,model=e1000,mac=" + mac}
	if fw == "uefi" {
		vars := filepath.Join(dir, "vars.fd")
		b, err := os.ReadFile("/usr/share/OVMF/OVMF_VARS_4M.fd")
		netnstest.NeedNoError(t, "OVMF (Debian package ovmf)", err)
		os.WriteFile(vars, b, 0o644)
		args = append(args, "-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd",
			"-drive", "if=pflash,format=raw,file="+vars)
	}
	cmd := ns.Command(ctx, "qemu-system-x86_64", args...)
	var qerr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &qerr, &qerr
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()

	var once sync.Once
	dump := func() {
		once.Do(func() {
			b, _ := os.ReadFile(console)
			t.Logf("console (%s):\n%s\nqemu: %s", fw, tail(b, 3000), qerr.String())
		})
	}
	deadline := time.After(5 * time.Minute)
	var report string
	for marker := false; !marker || report == ""; {
		select {
		case r := <-reports:
			report = r
		case err := <-done:
			done <- err
			dump()
			t.Fatalf("%s: QEMU exited before the report: %v", fw, err)
		case <-deadline:
			dump()
			t.Fatalf("%s: no first-boot marker and report within 5 minutes (marker seen: %v, report: %q)", fw, marker, report)
		case <-time.After(time.Second):
		}
		b, _ := os.ReadFile(console)
		marker = bytes.Contains(b, []byte("ingot-lab-image: first boot"))
	}
	want := fmt.Sprintf("POST /api/v1/agent/firstboot Bearer %s ", secret)
	if !strings.HasPrefix(report, want) {
		t.Errorf("%s: report %q, want %q...", fw, report, want)
	}
	var sw struct {
		Kernel    string `json:"kernel"`
		OSRelease string `json:"os_release"`
		Hostname  string `json:"hostname"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(report, want)), &sw); err != nil || !strings.HasSuffix(sw.Kernel, "-amd64") ||
		sw.OSRelease != "ingot lab image 1" || sw.Hostname != "lab-07" {
		t.Errorf("%s: report body %q (%v): want kernel *-amd64, os_release \"ingot lab image 1\", hostname lab-07", fw, report, err)
	}
	t.Logf("%s: %s", fw, report)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestE2EDebianImageBoots builds a minimal Debian image with mmdebstrap
// (pkg/image/testdata/debian-min) and boots it under OVMF until its
// first-boot unit runs. Building takes 2-20 minutes on 2 cores, so it runs
// only with INGOT_E2E_DEBIAN=1. Measured here: two builds gave the same
// sha256 (raw and raw.zst); BIOS and UEFI both reached the unit.
func TestE2EDebianImageBoots(t *testing.T) {
	netnstest.Optional(t, "INGOT_E2E_DEBIAN", "builds a Debian image with mmdebstrap (minutes)")
	netnstest.Need(t, "qemu-system-x86_64", "mmdebstrap", "mkfs.vfat", "mcopy", "mkfs.ext4", "sfdisk", "objcopy", "syslinux")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	s, err := Load(filepath.Join("testdata", "debian-min"))
	if err != nil {
		t.Fatal(err)
	}
	cache := initramfs.CacheDir(os.Getenv)
	res, err := BuildCached(ctx, s, Options{Cache: cache, Pool: CachePool(cache)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("debian-min %s raw.zst sha256 %s", res.Raw, res.ZstSHA256)
	dir := t.TempDir()
	console := filepath.Join(dir, "console.log")
	vars := filepath.Join(dir, "vars.fd")
	b, err := os.ReadFile("/usr/share/OVMF/OVMF_VARS_4M.fd")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(vars, b, 0o644)
	qctx, qcancel := context.WithTimeout(ctx, 6*time.Minute)
	defer qcancel()
	cmd := exec.CommandContext(qctx, "qemu-system-x86_64", "-accel", "tcg", "-smp", "1", "-m", "1024",
		"-nographic", "-monitor", "none", "-no-reboot", "-serial", "file:"+console, "-nic", "none",
		"-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd",
		"-drive", "if=pflash,format=raw,file="+vars,
		"-drive", "file="+res.Raw+",format=raw,if=virtio,snapshot=on")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for {
		b, _ := os.ReadFile(console)
		if bytes.Contains(b, []byte("ingot-debian-min: first boot")) {
			return
		}
		select {
		case <-qctx.Done():
			t.Fatalf("no first-boot marker within 6 minutes; console:\n%s", tail(b, 3000))
		case <-time.After(2 * time.Second):
		}
	}
}
