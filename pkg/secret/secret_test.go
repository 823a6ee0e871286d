package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpenAndRotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	id, sealed, err := k.Seal("bmc-r1-01", []byte("username=root\npassword=hunter2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "hunter2") {
		t.Fatal("the sealed value holds the plaintext")
	}
	// Reloaded from the file: opens. Under another name: does not.
	k2, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k2.Open("bmc-r1-01", id, sealed); err != nil || !strings.Contains(string(got), "hunter2") {
		t.Fatalf("Open: %q, %v", got, err)
	}
	if _, err := k2.Open("bmc-r1-02", id, sealed); err == nil {
		t.Error("a value copied under another name opened")
	}
	flipped := append([]byte(nil), sealed...)
	flipped[len(flipped)-1] ^= 1
	if _, err := k2.Open("bmc-r1-01", id, flipped); err == nil {
		t.Error("a damaged value opened")
	}
	// Rotation: during it both keys open; after it only the new one.
	if err := k2.BeginRotation(); err != nil {
		t.Fatal(err)
	}
	mid, _ := Load(path)
	if len(mid.IDs()) != 2 || mid.Current() == id {
		t.Fatalf("during rotation the file has %v", mid.IDs())
	}
	if _, err := mid.Open("bmc-r1-01", id, sealed); err != nil {
		t.Errorf("the old key no longer opens during rotation: %v", err)
	}
	id2, sealed2, _ := mid.Seal("bmc-r1-01", []byte("x"))
	if err := mid.FinishRotation(); err != nil {
		t.Fatal(err)
	}
	after, _ := Load(path)
	if _, err := after.Open("bmc-r1-01", id, sealed); !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), id) {
		t.Errorf("after rotation the old value: %v, want ErrWrongKey naming %s", err, id)
	}
	if got, err := after.Open("bmc-r1-01", id2, sealed2); err != nil || string(got) != "x" {
		t.Errorf("after rotation the re-sealed value: %q, %v", got, err)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	if _, err := Load(good); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(good)
	cases := map[string]struct {
		body string
		mode os.FileMode
		want string
	}{
		"readable by others": {string(b), 0o644, "0600"},
		"garbled line":       {header + " abc notbase64\n", 0o600, "line 1"},
		"wrong id":           {strings.Replace(string(b), header+" ", header+" 00", 1), 0o600, "line 2"},
		"empty":              {"# nothing\n", 0o600, "no key"},
	}
	for name, c := range cases {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(c.body), c.mode)
		os.Chmod(p, c.mode)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s and %q", name, err, p, c.want)
		}
	}
}

// FuzzOpen: a sealed value read back from a damaged store never panics and
// never opens unless it is the bytes Seal made.
func FuzzOpen(f *testing.F) {
	k, err := Load(filepath.Join(f.TempDir(), "k"))
	if err != nil {
		f.Fatal(err)
	}
	id, sealed, _ := k.Seal("n", []byte("value"))
	f.Add("n", id, sealed)
	f.Add("n", id, []byte{})
	f.Fuzz(func(t *testing.T, name, keyID string, b []byte) {
		v, err := k.Open(name, keyID, b)
		if err == nil && (name != "n" || keyID != id || string(v) != "value") {
			t.Fatalf("Open(%q, %q, %x) = %q", name, keyID, b, v)
		}
	})
}
