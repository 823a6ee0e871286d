package tlsca

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnsureKeepsAndRenews(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	c1, ca1, err := Ensure(dir, []string{"127.0.0.1", "ingot.mgmt"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CAKeyFile, ServerKey} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, err %v; want 0600", f, fi.Mode(), err)
		}
	}
	top, _ := Top(c1)
	if Fingerprint(top) != Fingerprint(ca1) {
		t.Errorf("the served chain does not end with the CA")
	}
	c2, ca2, err := Ensure(dir, []string{"ingot.mgmt"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if Fingerprint(c2.Leaf) != Fingerprint(c1.Leaf) || Fingerprint(ca2) != Fingerprint(ca1) {
		t.Errorf("Ensure made new certificates although the old ones cover the hosts")
	}
	// A new address, or an expiry within RenewBefore: a new server
	// certificate from the same CA.
	for name, tc := range map[string]struct {
		hosts []string
		now   time.Time
	}{"new host": {[]string{"10.0.0.1"}, now}, "expiring": {[]string{"ingot.mgmt"}, now.Add(ServerLifetime - RenewBefore + time.Hour)}} {
		c3, ca3, err := Ensure(dir, tc.hosts, tc.now)
		if err != nil {
			t.Fatal(name, err)
		}
		if Fingerprint(c3.Leaf) == Fingerprint(c1.Leaf) || Fingerprint(ca3) != Fingerprint(ca1) {
			t.Errorf("%s: server certificate kept (%v) or CA changed (%v)", name, Fingerprint(c3.Leaf) == Fingerprint(c1.Leaf), Fingerprint(ca3) != Fingerprint(ca1))
		}
	}
}

func TestEnsureNamesDamagedFile(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Ensure(dir, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, CAKeyFile), []byte("garbage"), 0o600)
	_, _, err := Ensure(dir, nil, time.Now())
	if err == nil || !strings.Contains(err.Error(), CAFile) {
		t.Errorf("a damaged CA key: err %v, want one naming %s", err, CAFile)
	}
}

func TestPinned(t *testing.T) {
	now := time.Now()
	good, goodCA, err := Ensure(t.TempDir(), []string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	other, otherCA, err := Ensure(t.TempDir(), []string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	// An impostor that presents the real CA certificate (public) after its
	// own leaf signed by another CA.
	forged := &tls.Certificate{Certificate: [][]byte{other.Certificate[0], goodCA.Raw}, PrivateKey: other.PrivateKey}
	cases := []struct {
		name   string
		served *tls.Certificate
		pin    string
		ok     bool
	}{
		{"the pinned CA", good, Fingerprint(goodCA), true},
		{"the pinned leaf", good, Fingerprint(good.Leaf), true},
		{"another CA", other, Fingerprint(goodCA), false},
		{"impostor leaf beside the real CA", forged, Fingerprint(goodCA), false},
		{"pinned the other CA", good, Fingerprint(otherCA), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{*tc.served}}
			srv.StartTLS()
			defer srv.Close()
			cfg, err := Pinned(tc.pin)
			if err != nil {
				t.Fatal(err)
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
			resp, err := hc.Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("GET: err %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok && !strings.Contains(err.Error(), "sha256:") && !strings.Contains(err.Error(), "verif") {
				t.Errorf("refusal does not say why: %v", err)
			}
		})
	}
}

func TestParseFingerprint(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for in, ok := range map[string]bool{
		"sha256:" + hex: true, strings.ToUpper(hex): true, "SHA256:" + strings.ToUpper(hex): true,
		"sha256:" + strings.Repeat("AB:", 31) + "AB": true, "sha256:abc": false, "": false, "md5:" + hex: false,
	} {
		got, err := ParseFingerprint(in)
		if (err == nil) != ok {
			t.Errorf("ParseFingerprint(%q): %q, %v; want ok=%v", in, got, err, ok)
		}
		if ok && got != "sha256:"+hex {
			t.Errorf("ParseFingerprint(%q) = %q", in, got)
		}
	}
}

func TestHolderReload(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Ensure(dir, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	load := func() (*tls.Certificate, error) {
		return LoadPair(filepath.Join(dir, ServerFile), filepath.Join(dir, ServerKey))
	}
	h, err := NewHolder(load)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", h.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}
	go srv.Serve(ln)
	defer srv.Close()
	served := func() string {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return Fingerprint(conn.ConnectionState().PeerCertificates[0])
	}
	before := served()
	// A new certificate on disk is served after Reload, not before.
	if _, _, err := Ensure(dir, []string{"127.0.0.1", "10.9.9.9"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if served() != before {
		t.Fatal("the new certificate was served before Reload")
	}
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if served() == before {
		t.Fatal("Reload did not swap the certificate")
	}
	// A broken file on reload keeps the old certificate and says why.
	os.WriteFile(filepath.Join(dir, ServerKey), []byte("x"), 0o600)
	if err := h.Reload(); err == nil {
		t.Error("Reload of a broken key succeeded")
	}
}

// FuzzParseFingerprint: a fingerprint arrives on a kernel command line; any
// bytes give a canonical fingerprint or an error, never a panic, and a
// canonical one parses to itself.
func FuzzParseFingerprint(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("ab", 32))
	f.Add(strings.Repeat("AB:", 31) + "AB")
	f.Add("sha256:")
	f.Fuzz(func(t *testing.T, s string) {
		fp, err := ParseFingerprint(s)
		if err != nil {
			return
		}
		if again, err := ParseFingerprint(fp); err != nil || again != fp || len(fp) != len("sha256:")+64 {
			t.Fatalf("ParseFingerprint(%q) = %q; again %q, %v", s, fp, again, err)
		}
	})
}
