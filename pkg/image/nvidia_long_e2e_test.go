//go:build e2e && e2e_long

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
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// TestE2ENvidiaImage builds images/debian-12-nvidia from its lock (the
// NVIDIA 535 driver's module compiled by DKMS against the pinned kernel,
// CUDA 11.8, the CUDA samples compiled in the image, clpeak; hours on a
// cold 2-core host, cached in INGOT_CACHE/images after) and checks the
// root: the DKMS module for the image's kernel, no private key, the
// burn-in tools. Then it boots the image under OVMF in QEMU (TCG), a VM
// without an NVIDIA GPU, with the first-boot settings ingot's agent writes
// (server 10.0.2.2:8080, a secret): the first-boot reporter must report
// within a minute of starting, with the driver pin's value naming the
// missing GPU in the words of the PCI bus, modprobe, the kernel and
// nvidia-smi, and end failed. make test-e2e-long runs it.
func TestE2ENvidiaImage(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "mmdebstrap", "apt-ftparchive", "mkfs.vfat", "mcopy", "mkfs.ext4", "debugfs", "sfdisk", "objcopy")
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Minute)
	defer cancel()
	s, err := Load(filepath.Join(repoRoot(t), "images", "debian-12-nvidia"))
	if err != nil {
		t.Fatal(err)
	}
	cache := initramfs.CacheDir(os.Getenv)
	start := time.Now()
	var res *Result
	if raw := os.Getenv("INGOT_E2E_NVIDIA_RAW"); raw != "" {
		// A build made by `ingot image build` (its NAME.json beside it):
		// boot it without building again.
		b, err := os.ReadFile(strings.TrimSuffix(raw, ".raw") + ".json")
		if err == nil {
			err = json.Unmarshal(b, &res)
		}
		if err != nil {
			t.Fatalf("INGOT_E2E_NVIDIA_RAW=%s: %v", raw, err)
		}
	} else if res, err = BuildCached(ctx, s, Options{Cache: cache, Pool: CachePool(cache)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("debian-12-nvidia: %s (raw %d bytes, raw.zst %d bytes, sha256 %s), build or cache %s",
		res.Raw, res.RawSize, res.ZstSize, res.ZstSHA256, time.Since(start).Round(time.Second))
	// The shipped Debian-only class is pinned to this build: the same
	// lock and builder give the same bytes here.
	set, diags := recipe.LoadDir(filepath.Join(repoRoot(t), "recipes"))
	if len(diags) > 0 {
		t.Fatalf("recipes: %v", diags)
	}
	if r, ok := set.Get("gpu-infer-l40sx4-debian"); !ok {
		t.Error("recipes/gpu-infer-l40sx4-debian.yaml is gone")
	} else if r.OS.Image.SHA256 != res.ZstSHA256 {
		t.Errorf("recipes/gpu-infer-l40sx4-debian.yaml pins os.image.sha256 %s; this build of its image is %s: the lock, the builder or its tools changed (pin the new build with ingot recipe pin)",
			r.OS.Image.SHA256, res.ZstSHA256)
	}
	rootAt := fmt.Sprintf("%s?offset=%d", res.Raw, (1+256)<<20) // 1 MiB + the 256 MiB ESP
	for _, c := range []struct{ cmd, want string }{
		{"ls -l /lib/modules/" + res.Kernel + "/updates/dkms", "nvidia-current.ko"},
		{"ls -l /usr/local/bin", "matrixMulCUBLAS"},
		{"ls -l /usr/local/bin", "p2pBandwidthLatencyTest"},
		{"ls -l /usr/local/bin", "bandwidthTest"},
		{"ls -l /usr/bin", "clpeak"},
		{"cat /etc/dkms/framework.conf.d/ingot.conf", "sign_file=/nonexistent"},
	} {
		out, _ := exec.Command("debugfs", "-R", c.cmd, rootAt).CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("debugfs %s: no %s in\n%s", c.cmd, c.want, out)
		}
	}
	if out, _ := exec.Command("debugfs", "-R", "ls -l /var/lib/dkms", rootAt).CombinedOutput(); strings.Contains(string(out), ".key") {
		t.Errorf("a key in the image's /var/lib/dkms:\n%s", out)
	}
	bootNoGPU(ctx, t, res.Raw)
}

// bootNoGPU boots a copy of raw with the first-boot settings written into
// its root and waits for the report.
func bootNoGPU(ctx context.Context, t *testing.T, raw string) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	if out, err := exec.Command("cp", "--sparse=always", raw, disk).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	secret := "mf_nvidia_image_test"
	os.WriteFile(filepath.Join(dir, "firstboot.env"), []byte("INGOT_SERVER=http://10.0.2.2:8080\nINGOT_MACHINE=m-1\nINGOT_FIRSTBOOT="+secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "cmds"), []byte("mkdir /etc/ingot\ncd /etc/ingot\nwrite "+filepath.Join(dir, "firstboot.env")+" firstboot.env\n"), 0o600)
	if out, err := exec.Command("debugfs", "-w", "-f", filepath.Join(dir, "cmds"), fmt.Sprintf("%s?offset=%d", disk, (1+256)<<20)).CombinedOutput(); err != nil {
		t.Fatalf("debugfs: %v: %s", err, out)
	}
	ns := netnstest.New(t, "ingot-nvimg")
	reports := make(chan string, 4)
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:8080"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reports <- r.Header.Get("Authorization") + " " + string(b)
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	vars := filepath.Join(dir, "vars.fd")
	b, err := os.ReadFile("/usr/share/OVMF/OVMF_VARS_4M.fd")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(vars, b, 0o644)
	console := filepath.Join(dir, "console.log")
	cmd := ns.Command(ctx, "qemu-system-x86_64", "-accel", "tcg", "-smp", "1", "-m", "2048", "-nographic", "-monitor", "none", "-no-reboot",
		"-serial", "file:"+console, "-nic", "user,model=e1000,mac=52:54:00:12:34:60",
		"-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd", "-drive", "if=pflash,format=raw,file="+vars,
		"-drive", "file="+disk+",format=raw,if=virtio")
	var qerr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &qerr, &qerr
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	start := time.Now()
	var unitStart time.Duration
	deadline := time.After(15 * time.Minute)
	for {
		select {
		case r := <-reports:
			took := time.Since(start)
			checkNoGPUReport(t, r, secret)
			waitConsole(t, console, "ingot-firstboot: no NVIDIA GPU", time.Minute)
			t.Logf("report %s after QEMU started, %s after the first-boot unit started: %s", took.Round(time.Second), (took - unitStart).Round(time.Second), r)
			if unitStart > 0 && took-unitStart > time.Minute {
				t.Errorf("the report came %s after the first-boot unit started, want within a minute", took-unitStart)
			}
			return
		case <-deadline:
			c, _ := os.ReadFile(console)
			t.Fatalf("no first-boot report within 15 minutes; console:\n%s\nqemu: %s", tail(c, 4000), qerr.String())
		case <-time.After(time.Second):
		}
		if c, _ := os.ReadFile(console); unitStart == 0 && bytes.Contains(c, []byte("Report the first boot to ingot")) {
			unitStart = time.Since(start)
		}
	}
}

func checkNoGPUReport(t *testing.T, r, secret string) {
	t.Helper()
	auth, body, _ := strings.Cut(r, " ")
	if auth != "Bearer" || !strings.HasPrefix(body, secret+" ") {
		t.Errorf("report authorization %q, want the first-boot secret", r)
	}
	var sw struct {
		Kernel  string            `json:"kernel"`
		Drivers map[string]string `json:"drivers"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(body, secret+" ")), &sw); err != nil {
		t.Fatalf("report body: %v: %s", err, body)
	}
	nv := sw.Drivers["nvidia"]
	for _, want := range []string{"not loaded (no NVIDIA GPU", "modprobe nvidia:", "nvidia-smi:"} {
		if !strings.Contains(nv, want) {
			t.Errorf("drivers.nvidia = %q, want it to contain %q", nv, want)
		}
	}
}

func waitConsole(t *testing.T, console, marker string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if c, _ := os.ReadFile(console); bytes.Contains(c, []byte(marker)) {
			return
		}
		time.Sleep(time.Second)
	}
	c, _ := os.ReadFile(console)
	t.Errorf("console lacks %q:\n%s", marker, tail(c, 3000))
}
