package image

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// TestFirstBootReporterVerifiesServer runs the golden image's Python
// first-boot reporter against a TLS server with a certificate from ingot's
// CA: with the CA's fingerprint it reports; with another fingerprint it
// refuses before sending the secret.
func TestFirstBootReporterVerifiesServer(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed (Debian package python3, in .ci/deps): ", err)
	}
	chain, ca, err := tlsca.Ensure(t.TempDir(), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var reports atomic.Int32
	var got map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/ca.pem", func(w http.ResponseWriter, _ *http.Request) { w.Write(tlsca.PEM(ca)) })
	mux.HandleFunc("POST /api/v1/agent/firstboot", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fb-secret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		reports.Add(1)
		w.Write([]byte("{}"))
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*chain}}
	srv.StartTLS()
	defer srv.Close()

	script := filepath.Join(repoRoot(t), "images", "debian-12-nvidia", "ingot-firstboot")
	run := func(fingerprint string) (string, error) {
		dir := t.TempDir()
		env := filepath.Join(dir, "firstboot.env")
		os.WriteFile(env, []byte("INGOT_SERVER=http://127.0.0.1:1\nINGOT_API="+srv.URL+"\nINGOT_CA="+fingerprint+"\nINGOT_FIRSTBOOT=fb-secret\n"), 0o600)
		cmdline := filepath.Join(dir, "cmdline")
		os.WriteFile(cmdline, []byte("console=ttyS0\n"), 0o644)
		cmd := exec.Command(py, script)
		cmd.Env = append(os.Environ(), "INGOT_FIRSTBOOT_ENV="+env, "INGOT_CMDLINE="+cmdline)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	_, otherCA, err := tlsca.Ensure(t.TempDir(), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(tlsca.Fingerprint(otherCA))
	if err == nil || !strings.Contains(out, "not the server this machine was told to trust") || reports.Load() != 0 {
		t.Fatalf("with another fingerprint: err %v, %d reports, output:\n%s", err, reports.Load(), out)
	}
	out, err = run(tlsca.Fingerprint(ca))
	if err != nil || reports.Load() != 1 || !strings.Contains(out, "reported to "+srv.URL) {
		t.Fatalf("with the CA's fingerprint: err %v, %d reports, output:\n%s", err, reports.Load(), out)
	}
	if got["kernel"] == "" {
		t.Errorf("report without a kernel: %v", got)
	}
}

// TestFirstBootReporterNoGPU runs the reporter on a node whose image has
// the NVIDIA driver but which has no NVIDIA GPU: it reports at once
// (without waiting for cloud-init or running the burn-in) with the driver
// pin's value saying why, in the words of the PCI bus, modprobe, the
// kernel and nvidia-smi, and exits non-zero. The three tools are stand-ins
// on PATH printing the messages the real ones print on such a machine
// (written from NVIDIA's and kmod's messages, not captured here: this host
// has no NVIDIA driver); sysfs is a folder with one non-NVIDIA device.
func TestFirstBootReporterNoGPU(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed (Debian package python3, in .ci/deps): ", err)
	}
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	dev := filepath.Join(dir, "sys", "bus", "pci", "devices", "0000:00:02.0")
	os.MkdirAll(bin, 0o755)
	os.MkdirAll(dev, 0o755)
	os.WriteFile(filepath.Join(dev, "vendor"), []byte("0x1234\n"), 0o644) // QEMU's VGA
	os.WriteFile(filepath.Join(dev, "class"), []byte("0x030000\n"), 0o644)
	for name, body := range map[string]string{
		"nvidia-smi": "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\"; exit 9",
		"modprobe":   "echo \"modprobe: ERROR: could not insert 'nvidia_current': No such device\" >&2; exit 1",
		"dmesg":      "echo '[    5.120000] NVRM: No NVIDIA GPU found.'",
	} {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755)
	}
	env := filepath.Join(dir, "firstboot.env")
	os.WriteFile(env, []byte("INGOT_SERVER="+srv.URL+"\nINGOT_FIRSTBOOT=fb-secret\n"), 0o600)
	cmdline := filepath.Join(dir, "cmdline")
	os.WriteFile(cmdline, []byte("console=ttyS0\n"), 0o644)
	cmd := exec.Command(py, filepath.Join(repoRoot(t), "images", "debian-12-nvidia", "ingot-firstboot"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "INGOT_FIRSTBOOT_ENV="+env, "INGOT_CMDLINE="+cmdline, "INGOT_SYS="+filepath.Join(dir, "sys"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("the reporter exited 0 on a node without its GPU:\n%s", out)
	}
	drv, _ := got["drivers"].(map[string]any)
	nv, _ := drv["nvidia"].(string)
	for _, want := range []string{"not loaded (no NVIDIA GPU: no PCI display or 3D controller of vendor 10de",
		"modprobe nvidia: modprobe: ERROR: could not insert 'nvidia_current': No such device",
		"kernel: [    5.120000] NVRM: No NVIDIA GPU found.",
		"nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."} {
		if !strings.Contains(nv, want) {
			t.Errorf("drivers.nvidia = %q\nwant it to contain %q", nv, want)
		}
	}
	if !strings.Contains(string(out), "ingot-firstboot: no NVIDIA GPU") {
		t.Errorf("the console does not say it:\n%s", out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the report took %s", d)
	}
}
