package vbmc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// A fleet's BMCs answer on their own ports with their own state.
func TestStartFleet(t *testing.T) {
	cfg := Config{Root: filepath.Join(mockupDir(t), "dmtf-public-rackmount1"), Username: testUser, Password: testPass}
	f, err := StartFleet(t.Context(), 20, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.URLs) != 20 || len(f.BMCs) != 20 {
		t.Fatalf("%d URLs, %d BMCs", len(f.URLs), len(f.BMCs))
	}
	sys := "/redfish/v1/Systems/437XR1138R2"
	c0 := &client{t: t, base: f.URLs[0], user: testUser, pass: testPass, hc: http.DefaultClient}
	c0.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}).want(t, 204, "off BMC 0")
	for i, u := range f.URLs {
		c := &client{t: t, base: u, user: testUser, pass: testPass, hc: http.DefaultClient}
		want := "On"
		if i == 0 {
			want = "Off"
		}
		if p := c.get(sys)["PowerState"]; p != want {
			t.Errorf("BMC %d PowerState %v, want %s", i, p, want)
		}
	}
	if f.BMCs[0].Stats().Requests != 2 {
		t.Errorf("BMC 0 saw %d requests, want 2", f.BMCs[0].Stats().Requests)
	}
	if _, err := StartFleet(t.Context(), 2, Config{Root: cfg.Root, Backend: &QEMU{}}); err == nil {
		t.Error("a fleet shared one Backend")
	}
	if _, err := StartFleet(t.Context(), 0, cfg); err == nil {
		t.Error("a fleet of 0 BMCs started")
	}
}

// StartMany + stop: the ports close.
func TestStartManyStop(t *testing.T) {
	urls, stop, err := StartMany(context.Background(), 3, Config{Root: filepath.Join(mockupDir(t), "supermicro-hgx-b200-partial")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(urls[2] + "/redfish/v1/Systems")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stop()
	if _, err := net.DialTimeout("tcp", urls[2][len("http://"):], time.Second); err == nil {
		t.Error("port still open after stop")
	}
}

// Serve with a self-signed certificate: a client pinning it talks HTTPS.
func TestServeSelfSignedTLS(t *testing.T) {
	b, err := New(Config{Root: filepath.Join(mockupDir(t), "gigabyte-ami-h262-z63")})
	if err != nil {
		t.Fatal(err)
	}
	conf, pemCert, fp, err := SelfSigned([]string{"127.0.0.1"}, time.Now())
	if err != nil || len(fp) != 64 {
		t.Fatalf("SelfSigned: %v fingerprint %q", err, fp)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- Serve(ctx, ln, b, conf) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + ln.Addr().String() + "/redfish/v1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := http.Get("https://" + ln.Addr().String() + "/redfish/v1"); err == nil {
		t.Error("an unpinned client accepted the self-signed certificate")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// When Serve's context ends, hung requests end with it and Serve returns.
func TestServeEndsHungRequests(t *testing.T) {
	b, err := newBMC(Config{Root: filepath.Join(mockupDir(t), "dmtf-public-tower"), Faults: Faults{Hang: []string{"/redfish/v1/Systems"}}},
		loadCached(t, filepath.Join(mockupDir(t), "dmtf-public-tower")))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, b, nil) }()
	got := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/redfish/v1/Systems")
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	eventually(t, "the request to hang", func() bool { return b.inFlight.Load() == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still running 10 s after its context ended")
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung client never got an answer or an error")
	}
}
