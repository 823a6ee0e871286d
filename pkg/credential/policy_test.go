package credential

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
)

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "node1"), []byte("username=admin\npassword=pw\n"), 0o600)
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("root:hunter2\n"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "link"))
	p := Policy{Dir: dir, EnvPrefix: "INGOT_BMC_", Getenv: func(k string) string {
		return map[string]string{"INGOT_BMC_NODE1": "admin:pw", "HOME": "a:b"}[k]
	}, Secrets: func(name string, _ *machine.Machine) (string, error) {
		if name == "node1-bmc" {
			return "username=admin\npassword=pw\n", nil
		}
		return "", errors.New("no secret " + name)
	}}
	for ref, want := range map[string]string{
		"file:" + filepath.Join(dir, "node1"):       "",
		"env:INGOT_BMC_NODE1":                       "",
		"file:/etc/shadow":                          "must name a file inside " + dir,
		"file:/etc/nope-does-not-exist":             "must name a file inside " + dir,
		"file:" + dir + "/../" + filepath.Base(dir): "must name a file inside",
		"file:relative":                             "must name a file inside",
		"env:HOME":                                  "starting with INGOT_BMC_",
		"env:INGOT_BMC_":                            "starting with INGOT_BMC_",
		"ldap:x":                                    "expected secret:NAME, file:PATH or env:VARIABLE",
		"secret:node1-bmc":                          "",
		"secret:Node1":                              "a secret name is lower-case",
		"secret:other":                              "no secret other",
		"file:" + filepath.Join(dir, "link"):        "not a readable file inside",
		"file:" + filepath.Join(dir, "absent"):      "not a readable file inside",
	} {
		_, _, err := p.Resolve(&machine.Machine{Name: "node1", BMC: machine.BMC{Endpoint: "https://10.0.0.5", CredentialRef: ref}})
		switch {
		case want == "" && err != nil:
			t.Errorf("Resolve(%s) = %v", ref, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("Resolve(%s) = %v, want an error saying %q", ref, err, want)
		}
	}
	// The refusal for an outside file says the same whether it exists.
	a, b := p.Check("file:/etc/passwd"), p.Check("file:/etc/no-such-file")
	if !errors.Is(a, ErrRefused) || strings.ReplaceAll(a.Error(), "passwd", "X") != strings.ReplaceAll(b.Error(), "no-such-file", "X") {
		t.Errorf("refusals differ by existence: %v / %v", a, b)
	}
	if err := (Policy{}).Check("file:" + filepath.Join(dir, "node1")); !errors.Is(err, ErrRefused) {
		t.Errorf("an empty policy allowed a file: %v", err)
	}
	if err := (Policy{}).Check("secret:node1-bmc"); !errors.Is(err, ErrRefused) {
		t.Errorf("a policy without secrets allowed secret: %v", err)
	}
}

// Resolve refuses plain http unless the machine is marked insecure, for
// every kind of reference, before it reads anything; the secret opener is
// handed the machine it dials for.
func TestResolveTransport(t *testing.T) {
	var asked []string
	p := Policy{EnvPrefix: "INGOT_BMC_", Getenv: func(string) string { return "admin:pw" },
		Secrets: func(name string, m *machine.Machine) (string, error) {
			asked = append(asked, name+"@"+m.BMC.Endpoint)
			return "admin:pw", nil
		}}
	for _, c := range []struct {
		endpoint string
		insecure bool
		ref      string
		want     string
	}{
		{"https://10.0.0.5", false, "secret:node1-bmc", ""},
		{"https://10.0.0.5", true, "env:INGOT_BMC_N1", ""},
		{"http://10.0.0.5", true, "secret:node1-bmc", ""},
		{"http://10.0.0.5", false, "secret:node1-bmc", "plain http"},
		{"http://10.0.0.5:8000", false, "env:INGOT_BMC_N1", "plain http"},
		{"HTTP://10.0.0.5", false, "env:INGOT_BMC_N1", "plain http"},
		{"ftp://10.0.0.5", true, "env:INGOT_BMC_N1", "expected https://HOST"},
		{"10.0.0.5", true, "env:INGOT_BMC_N1", "expected https://HOST"},
		{"", true, "env:INGOT_BMC_N1", "expected https://HOST"},
	} {
		asked = nil
		_, _, err := p.Resolve(&machine.Machine{Name: "n", BMC: machine.BMC{Endpoint: c.endpoint, Insecure: c.insecure, CredentialRef: c.ref}})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s insecure=%v %s: %v", c.endpoint, c.insecure, c.ref, err)
		case c.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s insecure=%v %s: %v, want ErrRefused saying %q", c.endpoint, c.insecure, c.ref, err, c.want)
		case c.want != "" && len(asked) > 0:
			t.Errorf("%s: the secret was opened (%v) for a refused dial", c.endpoint, asked)
		}
	}
}

func TestOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://10.0.0.5":             "https://10.0.0.5",
		"https://10.0.0.5:443/":        "https://10.0.0.5",
		"HTTPS://BMC-1.Example:8443":   "https://bmc-1.example:8443",
		"http://127.0.0.1:80":          "http://127.0.0.1",
		"http://127.0.0.1:8443/proxy/": "http://127.0.0.1:8443/proxy",
		"https://[fd00::5]":            "https://[fd00::5]",
		"https://[fd00::5]:8443":       "https://[fd00::5]:8443",
		" https://10.0.0.5 ":           "https://10.0.0.5",
	} {
		if got, err := Origin(in); err != nil || got != want {
			t.Errorf("Origin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.5", "ftp://x", "https://", "https://u:p@10.0.0.5", "https://10.0.0.5?x=1", "https://10.0.0.5#f"} {
		if got, err := Origin(bad); err == nil {
			t.Errorf("Origin(%q) = %q, want an error", bad, got)
		}
	}
}
