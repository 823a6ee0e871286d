package serve

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// TestRunAPIOverTLS: with --api-addr the API, its CA and /metrics are
// only on the HTTPS listener (trusted through DATA/tls/ca.pem, whose
// fingerprint is what machines pin), the boot listener keeps only what
// firmware fetches, plain HTTP to the API port gets no answer, and a
// reload serves a replaced certificate.
func TestRunAPIOverTLS(t *testing.T) {
	cfg, d := httpOnly(t)
	cfg.APIAddr = "127.0.0.1:0"
	// An operator's certificate (here made by another ingot CA), so the
	// test can replace it on disk and reload.
	opDir := t.TempDir()
	if _, _, err := tlsca.Ensure(opDir, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg.TLSCert, cfg.TLSKey = filepath.Join(opDir, tlsca.ServerFile), filepath.Join(opDir, tlsca.ServerKey)
	reload := make(chan os.Signal, 1)
	d.Reload = reload
	d.Mount = []func(*http.ServeMux){func(m *http.ServeMux) {
		m.HandleFunc("GET /api/v1/ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong") })
	}}
	addrs, stop := startRun(t, cfg, d)
	if addrs.API == nil || !strings.HasPrefix(addrs.APIURL, "https://127.0.0.1:") || !strings.HasPrefix(addrs.CA, "sha256:") {
		t.Fatalf("addrs: %+v", addrs)
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(opDir, tlsca.CAFile))
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(c *http.Client, url string) (int, string) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	api, boot := "https://"+addrs.API.String(), "http://"+addrs.HTTP.String()
	for _, c := range []struct {
		c          *http.Client
		url        string
		code       int
		bodyPrefix string
	}{
		{hc, api + "/api/v1/ping", 200, "pong"},
		{hc, api + "/metrics", 200, "# HELP"},
		{hc, api + "/healthz", 200, "ok"},
		{hc, api + "/api/v1/ca.pem", 200, "-----BEGIN CERTIFICATE-----"},
		{http.DefaultClient, boot + "/healthz", 200, "ok"},
		{http.DefaultClient, boot + "/api/v1/ping", 404, ""},
		{http.DefaultClient, boot + "/metrics", 404, ""},
	} {
		code, body := get(c.c, c.url)
		if code != c.code || !strings.HasPrefix(body, c.bodyPrefix) {
			t.Errorf("GET %s: %d %.60q, want %d %q", c.url, code, body, c.code, c.bodyPrefix)
		}
	}
	// The served ca.pem is the pinned certificate.
	_, body := get(hc, api+"/api/v1/ca.pem")
	blk, _ := pem.Decode([]byte(body))
	if blk == nil {
		t.Fatal("ca.pem: no PEM")
	}
	if cert, err := x509.ParseCertificate(blk.Bytes); err != nil || tlsca.Fingerprint(cert) != addrs.CA {
		t.Errorf("ca.pem is not the pinned certificate %s (%v)", addrs.CA, err)
	}
	// Plain HTTP on the API port: refused by the TLS listener.
	if code, _ := get(http.DefaultClient, "http://"+addrs.API.String()+"/api/v1/ping"); code == 200 {
		t.Error("plain HTTP to the API port was answered")
	}
	// A machine pinning the fingerprint connects.
	pinned, err := tlsca.Pinned(addrs.CA)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(&http.Client{Transport: &http.Transport{TLSClientConfig: pinned}}, api+"/api/v1/ping"); code != 200 {
		t.Errorf("pinned client: %d %s", code, body)
	}
	// Reload: a replaced certificate is served after SIGHUP.
	served := func() string {
		conn, err := tls.Dial("tcp", addrs.API.String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return tlsca.Fingerprint(conn.ConnectionState().PeerCertificates[0])
	}
	before := served()
	if _, _, err := tlsca.Ensure(opDir, []string{"127.0.0.1", "10.1.2.3"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	reload <- os.Interrupt
	deadline := time.Now().Add(5 * time.Second)
	for served() == before {
		if time.Now().After(deadline) {
			t.Fatal("the replaced certificate was not served within 5 s of the reload signal")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRunMakesCA: without --tls-cert serve makes its CA in DATA/tls, keeps
// it across restarts, and names the server IP and loopback.
func TestRunMakesCA(t *testing.T) {
	cfg, d := httpOnly(t)
	cfg.APIAddr = "127.0.0.1:0"
	var fps []string
	for range 2 {
		a, stop := startRun(t, cfg, d)
		fps = append(fps, a.CA)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	if fps[0] != fps[1] {
		t.Errorf("the CA changed across restarts: %s then %s", fps[0], fps[1])
	}
	for _, f := range []string{tlsca.CAFile, tlsca.CAKeyFile, tlsca.ServerFile, tlsca.ServerKey} {
		if _, err := os.Stat(filepath.Join(cfg.Data, "tls", f)); err != nil {
			t.Error(err)
		}
	}
	c, err := tlsca.LoadPair(filepath.Join(cfg.Data, "tls", tlsca.ServerFile), filepath.Join(cfg.Data, "tls", tlsca.ServerKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
}
