package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// Secrets and BMC password rotation through a running server, against a
// virtual BMC that locks an account after 3 failed logins: the secret is
// sealed (the database file never holds the password), a machine enrolled
// with secret:NAME is inspected through it, rotation changes the BMC's
// password without a single failed login, the old password stops working,
// the key rotates with every secret still opening, and what cannot be
// rotated or deleted is refused saying why.
func TestSecretsAndBMCRotationCLI(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	b, err := vbmc.New(vbmc.Config{Root: vbmcMockup(t, "dmtf-public-rackmount1"), Username: bmcTestUser, Password: bmcTestPass,
		Lockout: vbmc.Lockout{Threshold: 3, Duration: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)

	val := filepath.Join(t.TempDir(), "cred")
	os.WriteFile(val, []byte("username="+bmcTestUser+"\npassword="+bmcTestPass+"\n"), 0o600)
	if out := s.ok("secret", "set", "r1-bmc", "--from-file", val); !strings.Contains(out, "secret:r1-bmc") {
		t.Errorf("secret set: %q", out)
	}
	s.ok("machine", "add", "node-1", "--mac", "52:54:00:cc:00:01", "--bmc", srv.URL, "--bmc-insecure", "--bmc-cred", "secret:r1-bmc", "--recipe", "tower-gpu")
	s.ok("machine", "inspect", "node-1")

	var secrets []wire.Secret
	json.Unmarshal([]byte(s.ok("secret", "ls", "-o", "json")), &secrets)
	if len(secrets) != 1 || secrets[0].Name != "r1-bmc" || len(secrets[0].UsedBy) != 1 || secrets[0].UsedBy[0] != "node-1" || secrets[0].KeyID == "" {
		t.Fatalf("secret ls: %+v", secrets)
	}
	key1 := secrets[0].KeyID
	if db, _ := os.ReadFile(filepath.Join(s.data, "ingot.db")); bytes.Contains(db, []byte(bmcTestPass)) {
		t.Error("the database file holds the BMC password in clear")
	}
	if fi, err := os.Stat(filepath.Join(s.data, "secrets.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secrets.key: %v %v, want mode 0600", fi, err)
	}

	out := s.ok("bmc", "rotate", "node-1")
	if !strings.Contains(out, "rotated") {
		t.Errorf("bmc rotate:\n%s", out)
	}
	// The server logs in with the new password; the old one is refused,
	// and that one refusal does not lock the account (threshold 3).
	s.ok("machine", "inspect", "node-1")
	if _, err := bmc.Dial(context.Background(), bmc.Config{Endpoint: srv.URL, Username: bmcTestUser, Password: bmcTestPass}); err == nil {
		t.Error("the old BMC password still logs in after rotation")
	}
	s.ok("bmc", "rotate", "node-1") // a second rotation from the rotated password
	s.ok("machine", "inspect", "node-1")
	if ev := s.ok("events", "node-1"); strings.Count(ev, "BMC password rotated") != 2 {
		t.Errorf("events lack two rotations:\n%s", ev)
	}

	// Key rotation: every secret sealed again, and still opening.
	if out := s.ok("secret", "rotate-key"); !strings.Contains(out, "1 secrets sealed again") {
		t.Errorf("rotate-key: %q", out)
	}
	json.Unmarshal([]byte(s.ok("secret", "ls", "-o", "json")), &secrets)
	if secrets[0].KeyID == key1 {
		t.Error("rotate-key kept the old key")
	}
	s.ok("machine", "inspect", "node-1")

	// Refusals that say why.
	cred := s.bmcCredFile()
	_, url2 := startTestBMC(t, "dmtf-public-rackmount1")
	s.ok("machine", "add", "node-2", "--mac", "52:54:00:cc:00:02", "--bmc", url2, "--bmc-insecure", "--bmc-cred", "file:"+cred)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bmc", "rotate", "node-2"}, "only secret: references are rotated"},
		{[]string{"secret", "rm", "r1-bmc"}, "node-1"},
		{[]string{"secret", "set", "Bad_Name", "--from-file", val}, "DNS-style"},
		{[]string{"machine", "add", "node-3", "--mac", "52:54:00:cc:00:03", "--bmc-cred", "secret:Nope"}, "a secret name is lower-case"},
	} {
		if _, _, err := s.run(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ingot %s: %v, want an error saying %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
