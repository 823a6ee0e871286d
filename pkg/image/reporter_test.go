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
