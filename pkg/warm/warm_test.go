package warm

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func testKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	k, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "warm.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestVerify(t *testing.T) {
	key, other := testKey(t), testKey(t)
	pub := key.Public().(ed25519.PublicKey)
	good, sig := Sign(key, "m-1", "j-1", t0)
	_, otherSig := Sign(other, "m-1", "j-1", t0)
	farBody, farSig := Sign(key, "m-1", "j-1", t0.Add(time.Hour))
	for _, tc := range []struct {
		name      string
		body      []byte
		sig, mach string
		now       time.Time
		want      string
	}{
		{"good", good, sig, "m-1", t0.Add(time.Minute), ""},
		{"another server's key", good, otherSig, "m-1", t0, "not made by this node's ingot server"},
		{"body changed", append([]byte(" "), good...), sig, "m-1", t0, "not made by"},
		{"not base64", good, "%%%", "m-1", t0, "expected a base64 ed25519 signature"},
		{"another machine", good, sig, "m-2", t0, `request for machine "m-1"; this is "m-2"`},
		{"expired", good, sig, "m-1", t0.Add(MaxAge + time.Second), "request expired"},
		{"minted far ahead (server clock)", farBody, farSig, "m-1", t0, "more than 2m0s ahead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(pub, tc.body, tc.sig, tc.mach, tc.now)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Verify: %v, want %q", err, tc.want)
			}
		})
	}
}

// The key survives a restart; a damaged key file is named, never replaced.
func TestKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "warm.key")
	a, err := LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateKey(p)
	if err != nil || !a.Equal(b) {
		t.Fatalf("key changed across loads: %v", err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	os.WriteFile(p, []byte("garbage\n"), 0o600)
	if _, err := LoadOrCreateKey(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("damaged key: %v, want an error naming %s", err, p)
	}
}

func TestParseScript(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "boot", "httpboot", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b, err := ParseScript(read("known-bios.ipxe"))
	if err != nil || b.KernelURL != "http://10.77.0.1:8080/artifacts/sha256/KERNEL_SHA" || b.InitrdURL != "http://10.77.0.1:8080/artifacts/sha256/INITRD_SHA" ||
		b.Cmdline != "ingot.server=http://10.77.0.1:8080 ingot.token=tok-m-0001 ingot.machine=m-0001 console=ttyS0 panic=-1" {
		t.Errorf("agent script: %+v, %v", b, err)
	}
	for name, want := range map[string]string{
		"ready-bios.ipxe":     "boots the local disk",
		"recipe-missing.ipxe": `cannot boot machine node4: recipe missing`,
	} {
		if _, err := ParseScript(read(name)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	for _, bad := range []string{"", "kernel http://x/k\n", "#!ipxe\nkernel file:///etc/shadow\ninitrd http://x/i\n", "#!ipxe\ninitrd http://x/i\n"} {
		if _, err := ParseScript([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseScript: the boot listener's answer is untrusted bytes to the
// node; any input parses or is refused, and a parse has http(s) URLs.
func FuzzParseScript(f *testing.F) {
	f.Add([]byte("#!ipxe\nkernel http://s/artifacts/sha256/ab initrd=initrd.img a=b\ninitrd --name initrd.img http://s/i\nboot\n"))
	f.Add([]byte("#!ipxe\necho ingot: no\nexit 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseScript(b)
		if err == nil && (!strings.HasPrefix(got.KernelURL, "http") || !strings.HasPrefix(got.InitrdURL, "http")) {
			t.Fatalf("parsed non-http URLs: %+v", got)
		}
	})
}

// FuzzParseConfig: the installed system's settings file may be damaged;
// it parses with every field checked, or is refused.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"server":"http://10.77.0.1:8080","machine":"m-1","mac":"52:54:00:00:00:01","key":"` + EncodePublic(make([]byte, 32)) + `","port":9443}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err == nil && (c.Machine == "" || c.MAC == "" || c.Port <= 0) {
			t.Fatalf("accepted an incomplete config: %+v", c)
		}
	})
}

// The whole exchange over TLS: the server's signed request is accepted
// once (a replay is refused), the node fetches its script and the agent's
// kernel and initrd, checks their sha256, and kexecs with the script's
// command line; a request signed by another key is refused.
func TestServiceKexecsIntoTheAgent(t *testing.T) {
	kernel, initrd := []byte("KERNEL"), []byte("INITRD")
	sha := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	var boot *httptest.Server
	boot = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ipxe" && r.URL.Query().Get("mac") == "52:54:00:00:00:01":
			w.Write([]byte("#!ipxe\n# ingot: agent\nkernel " + boot.URL + "/artifacts/sha256/" + sha(kernel) + " initrd=initrd.img ingot.token=T ingot.machine=m-1\n" +
				"initrd --name initrd.img " + boot.URL + "/artifacts/sha256/" + sha(initrd) + "\nboot\n"))
		case r.URL.Path == "/artifacts/sha256/"+sha(kernel):
			w.Write(kernel)
		case r.URL.Path == "/artifacts/sha256/"+sha(initrd):
			w.Write(initrd)
		default:
			http.NotFound(w, r)
		}
	}))
	defer boot.Close()
	key := testKey(t)
	cfg := Config{Server: boot.URL, Machine: "m-1", MAC: "52:54:00:00:00:01", Key: EncodePublic(key.Public().(ed25519.PublicKey)), Port: Port}
	var mu sync.Mutex
	kexeced := make(chan []string, 1)
	svc, err := NewService(cfg, Options{Dir: t.TempDir(), Nonces: filepath.Join(t.TempDir(), "nonces.json"), Kexec: func(k, i, cmdline string) error {
		kb, _ := os.ReadFile(k)
		ib, _ := os.ReadFile(i)
		mu.Lock()
		defer mu.Unlock()
		kexeced <- []string{string(kb), string(ib), cmdline}
		select {} // a kexec does not return
	}})
	if err != nil {
		t.Fatal(err)
	}
	node := httptest.NewTLSServer(svc)
	defer node.Close()
	addr := strings.TrimPrefix(node.URL, "https://")
	ctx := context.Background()
	if err := Trigger(ctx, addr, []byte(`{"machine":"m-1"}`), "AAAA", time.Second*5); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("unsigned request: %v, want 403", err)
	}
	body, sig := Sign(key, "m-1", "j-1", time.Now())
	if err := Trigger(ctx, addr, body, sig, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-kexeced:
		if got[0] != "KERNEL" || got[1] != "INITRD" || got[2] != "ingot.token=T ingot.machine=m-1" {
			t.Errorf("kexec of %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no kexec within 10 s")
	}
	if err := Trigger(ctx, addr, body, sig, 5*time.Second); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("replayed request: %v, want 409", err)
	}
}

// A node that has just booted may not listen yet: Trigger tries a refused
// connection again until its timeout, and gives up after it naming why.
func TestTriggerWaitsForTheService(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	if err := Trigger(context.Background(), addr, []byte("{}"), "x", 1500*time.Millisecond); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("no service: %v, want connection refused", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("gave up after %s, before its timeout", took)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	go func() {
		time.Sleep(1500 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		srv.Listener = ln
		srv.StartTLS()
	}()
	defer func() { time.Sleep(100 * time.Millisecond); srv.Close() }()
	if err := Trigger(context.Background(), addr, []byte("{}"), "x", 10*time.Second); err != nil {
		t.Errorf("a service listening 1.5 s late: %v", err)
	}
}
