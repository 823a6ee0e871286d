package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// listener is an operator's own "BMC": a virtual BMC (whose password the
// operator chose) that records every request it gets, headers and body.
type listener struct {
	mu   sync.Mutex
	seen []string
	url  string
}

func startListener(t *testing.T, tls bool) *listener {
	t.Helper()
	l := &listener{}
	b, err := vbmc.New(vbmc.Config{Root: vbmcMockup(t, "dmtf-public-rackmount1"), Username: "evil", Password: "not-the-secret"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		l.mu.Lock()
		l.seen = append(l.seen, string(dump))
		l.mu.Unlock()
		b.ServeHTTP(w, r)
	})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

// got returns what the listener received, all of it.
func (l *listener) got() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.seen, "\n")
}

// The attack of issue 25: an operator token holder binds a sealed BMC
// secret to a new machine whose BMC endpoint is a listener of their own
// and inspects it, hoping the server logs in there with the secret. The
// secret was bound to its real BMC at its first use, so the dial is
// refused before a byte is sent (https or plain http), the refusal is a
// security event on that machine, and the secret goes there only after an
// explicit `secret allow`, itself an event. Plain http is refused for a
// machine not marked insecure, whatever its credential. On the code before
// bindings, the listener received the password in the session POST.
func TestSecretBoundToItsBMC(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	b, err := vbmc.New(vbmc.Config{Root: vbmcMockup(t, "dmtf-public-rackmount1"), Username: bmcTestUser, Password: bmcTestPass})
	if err != nil {
		t.Fatal(err)
	}
	real := httptest.NewTLSServer(b) // its own certificate: the machine is marked insecure (no verification)
	t.Cleanup(real.Close)
	val := filepath.Join(t.TempDir(), "cred")
	os.WriteFile(val, []byte("username="+bmcTestUser+"\npassword="+bmcTestPass+"\n"), 0o600)
	s.ok("secret", "set", "r1-bmc", "--from-file", val)
	s.ok("machine", "add", "node-1", "--mac", "52:54:00:dd:00:01", "--bmc", real.URL, "--bmc-insecure", "--bmc-cred", "secret:r1-bmc")
	s.ok("machine", "inspect", "node-1") // the first use binds r1-bmc to node-1's BMC
	if ev := s.ok("events", "node-1"); !strings.Contains(ev, "secret r1-bmc bound to "+real.URL) {
		t.Errorf("node-1's events lack the first-use binding:\n%s", ev)
	}

	evilTLS, evilHTTP, evilHTTP2 := startListener(t, true), startListener(t, false), startListener(t, false)
	downgrade := strings.Replace(real.URL, "https://", "http://", 1) // the real BMC's host and port, without TLS
	for i, c := range []struct {
		name, endpoint string
		insecure       bool
		want           string
	}{
		{"evil-tls", evilTLS.url, true, "refused to send secret r1-bmc to " + evilTLS.url},
		{"evil-http", evilHTTP.url, true, "refused to send secret r1-bmc to " + evilHTTP.url},
		{"evil-http-secure", evilHTTP2.url, false, "is plain http"},
		{"evil-downgrade", downgrade, true, "refused to send secret r1-bmc to " + downgrade},
	} {
		add := []string{"machine", "add", c.name, "--mac", fmt.Sprintf("52:54:00:dd:01:%02x", i), "--bmc", c.endpoint, "--bmc-cred", "secret:r1-bmc"}
		if c.insecure {
			add = append(add, "--bmc-insecure")
		}
		s.ok(add...)
		_, _, err := s.run("machine", "inspect", c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "403") {
			t.Errorf("inspect %s (%s): %v, want a 403 saying %q", c.name, c.endpoint, err, c.want)
		}
		if c.insecure && !strings.Contains(s.ok("events", c.name), "security") {
			t.Errorf("%s: no security event for the refused dial", c.name)
		}
	}
	if got := evilTLS.got() + evilHTTP.got() + evilHTTP2.got(); got != "" {
		t.Fatalf("the operator's listeners received requests (the password must never arrive):\n%s", got)
	}

	// The explicit action: allowed, the secret goes there, and it is an
	// event on the machine it concerns.
	s.ok("secret", "allow", "r1-bmc", "--endpoint", evilTLS.url)
	s.run("machine", "inspect", "evil-tls") // the listener's BMC takes another password: inspect fails after sending it
	basic := base64.StdEncoding.EncodeToString([]byte(bmcTestUser + ":" + bmcTestPass))
	if got := evilTLS.got(); !strings.Contains(got, bmcTestPass) && !strings.Contains(got, basic) {
		t.Errorf("after secret allow, the listener did not get the login (want it there: the allow works):\n%s", got)
	}
	if ev := s.ok("events", "evil-tls"); !strings.Contains(ev, "secret r1-bmc allowed to go to "+evilTLS.url+" (this machine's BMC) by operator:") {
		t.Errorf("evil-tls's events lack the allow:\n%s", ev)
	}
	var secrets []wire.Secret
	json.Unmarshal([]byte(s.ok("secret", "ls", "-o", "json")), &secrets)
	if len(secrets) != 1 || len(secrets[0].Endpoints) != 2 || secrets[0].Endpoints[0].Endpoint != real.URL ||
		secrets[0].Endpoints[0].By != "first use by node-1" || !strings.HasPrefix(secrets[0].Endpoints[1].By, "operator:") {
		t.Errorf("secret ls: %+v, want the first-use binding and the allow", secrets)
	}
	if out := s.ok("secret", "ls"); !strings.Contains(out, real.URL+" (first use by node-1)") {
		t.Errorf("secret ls table:\n%s", out)
	}

	// Bound when set: a new secret goes only where --endpoint says, even
	// at its first use; a file: credential is refused over plain http too.
	s.ok("secret", "set", "r2-bmc", "--from-file", val, "--endpoint", real.URL)
	evil3, evil4 := startListener(t, false), startListener(t, false)
	s.ok("machine", "add", "evil-2", "--mac", "52:54:00:dd:02:01", "--bmc", evil3.url, "--bmc-insecure", "--bmc-cred", "secret:r2-bmc")
	if _, _, err := s.run("machine", "inspect", "evil-2"); err == nil || !strings.Contains(err.Error(), "bound to "+real.URL) {
		t.Errorf("inspect evil-2: %v, want refused: bound to %s", err, real.URL)
	}
	s.ok("machine", "add", "file-http", "--mac", "52:54:00:dd:02:02", "--bmc", evil4.url, "--bmc-cred", "file:"+s.bmcCredFile())
	if _, _, err := s.run("machine", "inspect", "file-http"); err == nil || !strings.Contains(err.Error(), "is plain http") {
		t.Errorf("inspect file-http: %v, want refused: plain http", err)
	}
	if got := evil3.got() + evil4.got(); got != "" {
		t.Errorf("the plain http listeners received requests:\n%s", got)
	}
}
