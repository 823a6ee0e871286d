package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// The CLI reaches the API only over TLS it can verify: with serve's CA it
// works; without it, or with another CA, it refuses before sending the
// token; and the API is not on the plain boot listener.
func TestCLIVerifiesServer(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	s.ok("machine", "ls")
	otherDir := t.TempDir()
	if _, _, err := tlsca.Ensure(otherDir, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for name, ca := range map[string]string{"no CA": "", "another CA": filepath.Join(otherDir, tlsca.CAFile)} {
		t.Setenv("INGOT_CA", ca)
		if _, _, err := s.run("machine", "ls"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a certificate error", name, err)
		}
	}
	t.Setenv("INGOT_CA", s.caFile())
	// A plain-HTTP URL to the TLS port is refused, not answered.
	plain := strings.Replace(s.url, "https://", "http://", 1)
	if out, _, err := s.run("machine", "ls", "--server", plain); err == nil {
		t.Errorf("plain HTTP to the API port answered:\n%s", out)
	}
	if b, err := os.ReadFile(s.caFile()); err != nil || !strings.Contains(string(b), "BEGIN CERTIFICATE") {
		t.Errorf("serve's ca.pem: %v", err)
	}
}
