package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// TestMain lets the test binary stand in for ingot: re-executed with
// INGOT_TEST_AS_INGOT=1 it runs main, so the CLI tier talks to a real
// `ingot serve` process over HTTP without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("INGOT_TEST_AS_INGOT") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cliServer is a real `ingot serve` (DHCP and TFTP off, HTTP on loopback)
// that the in-process CLI talks to, as an operator's laptop would.
type cliServer struct {
	t         *testing.T
	url       string
	data      string
	recipes   string
	tokenFile string
	credDir   string // --bmc-credentials-dir
	log       *lockedBuffer
}

// startServe starts serve on recipes (a folder) and points the CLI at it
// through the environment (INGOT_SERVER, INGOT_TOKEN_FILE), with the
// token the server bootstrapped on its first start.
func startServe(t *testing.T, recipes string, extra ...string) *cliServer {
	t.Helper()
	s := &cliServer{t: t, data: t.TempDir(), recipes: recipes, log: &lockedBuffer{}, credDir: t.TempDir()}
	addr := freePort(t)
	s.url = "https://" + addr
	args := append([]string{"serve", "--dhcp", "off", "--tftp=false", "--http-addr", freePort(t), "--api-addr", addr, "--data", s.data,
		"--recipes", recipes, "--log-level", "warn", "--bmc-credentials-dir", s.credDir}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "INGOT_TEST_AS_INGOT=1")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("ingot serve did not stop within 20 s of SIGTERM:\n%s", s.log)
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", s.log)
		}
	})
	s.waitHealthy(done)
	s.tokenFile = filepath.Join(s.data, wire.BootstrapTokenFile)
	t.Setenv("INGOT_SERVER", s.url)
	t.Setenv("INGOT_CA", s.caFile())
	t.Setenv("INGOT_TOKEN_FILE", s.tokenFile)
	t.Setenv("INGOT_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("INGOT_CONTEXT", "")
	t.Setenv("INGOT_TOKEN", "")
	t.Setenv("USER", "alice")
	return s
}

// waitHealthy waits for /healthz; serve exiting first fails at once.
func (s *cliServer) waitHealthy(exited chan error) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := s.https().Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup's wait
			s.t.Fatalf("ingot serve exited (%v) before answering:\n%s", err, s.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.t.Fatalf("ingot serve did not answer on %s within 30 s:\n%s", s.url, s.log)
}

// caFile is the CA serve made in its data folder: the CLI's --ca.
func (s *cliServer) caFile() string { return filepath.Join(s.data, "tls", "ca.pem") }

// https is a client trusting serve's CA, once serve made it (a client
// that fails every request before).
func (s *cliServer) https() *http.Client {
	pool := x509.NewCertPool()
	if b, err := os.ReadFile(s.caFile()); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// run runs `ingot ARGS` in-process and returns stdout, stderr and the error.
func (s *cliServer) run(args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// ok runs ingot and fails the test on error.
func (s *cliServer) ok(args ...string) string {
	s.t.Helper()
	out, errOut, err := s.run(args...)
	if err != nil {
		s.t.Fatalf("ingot %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// recipesDir writes minimal recipes (name: file) into a new folder.
func recipesDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if body == "" {
			body = fmt.Sprintf("name: %s\nversion: 1.0.0\n", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
