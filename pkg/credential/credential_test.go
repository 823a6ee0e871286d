package credential

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kv := write("kv", "# lab BMC\nusername=admin\npassword=s3:cr=t\n")
	colon := write("colon", "root:calvin\n")
	empty := write("empty", "\n")
	env := map[string]string{"BMC1": "ops:hunter2"}
	cases := []struct {
		ref, user, pass, err string
	}{
		{ref: "file:" + kv, user: "admin", pass: "s3:cr=t"},
		{ref: "file:" + colon, user: "root", pass: "calvin"},
		{ref: "env:BMC1", user: "ops", pass: "hunter2"},
		{ref: "env:NOPE", err: "variable NOPE is empty or unset"},
		{ref: "file:" + empty, err: "expected username= and password= lines"},
		{ref: "file:/nonexistent", err: "no such file"},
		{ref: "vault:x", err: `unknown kind "vault"`},
		{ref: "admin", err: "expected secret:NAME, file:PATH or env:VARIABLE"},
	}
	for _, tc := range cases {
		u, p, err := Resolve(tc.ref, func(k string) string { return env[k] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.ref, err, tc.err)
			}
			continue
		}
		if err != nil || u != tc.user || p != tc.pass {
			t.Errorf("%s: got %q %q %v, want %q %q", tc.ref, u, p, err, tc.user, tc.pass)
		}
	}
}
