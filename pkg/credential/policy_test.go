package credential

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "node1"), []byte("username=admin\npassword=pw\n"), 0o600)
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("root:hunter2\n"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "link"))
	p := Policy{Dir: dir, EnvPrefix: "INGOT_BMC_", Getenv: func(k string) string {
		return map[string]string{"INGOT_BMC_NODE1": "admin:pw", "HOME": "a:b"}[k]
	}, Secrets: func(name string) (string, error) {
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
		_, _, err := p.Resolve(ref)
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
