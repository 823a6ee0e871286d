package bootfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func sum(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

// TestPin: a pinned first stage is served while its bytes are the pinned
// ones; changed after start, it is refused with an error naming it (the
// bytes served are the bytes hashed: the same descriptor, rewound); a
// change before start fails Pin itself. Unpinned files are served as before.
func TestPin(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "undionly.kpxe"), []byte("ipxe bios"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not pinned"), 0o644)
	d, err := New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Pin(map[string]string{"undionly.kpxe": sum("ipxe bios"), "snponly.efi": sum("absent")}); err != nil {
		t.Fatalf("Pin of matching files = %v", err)
	}
	if m := d.Missing(); len(m) != 1 || m[0] != "snponly.efi" {
		t.Errorf("Missing = %v, want [snponly.efi]", m)
	}
	f, err := d.Open("undionly.kpxe")
	if err != nil {
		t.Fatalf("Open(pinned, unchanged) = %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "ipxe bios" {
		t.Errorf("served %q after the check, want the whole file", b)
	}
	os.WriteFile(filepath.Join(dir, "undionly.kpxe"), []byte("ipxe bios, rebuilt"), 0o644)
	_, err = d.Open("undionly.kpxe")
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "undionly.kpxe") || !strings.Contains(err.Error(), "pinned "+sum("ipxe bios")) {
		t.Errorf("Open(changed) = %v, want ErrChanged naming the file and its pin", err)
	}
	if f, err := d.Open("notes.txt"); err != nil {
		t.Errorf("Open(unpinned) = %v", err)
	} else {
		f.Close()
	}
	d2, _ := New([]string{dir}, nil)
	if err := d2.Pin(map[string]string{"undionly.kpxe": sum("ipxe bios")}); !errors.Is(err, ErrChanged) {
		t.Errorf("Pin at start with a changed file = %v, want ErrChanged", err)
	}
	if err := d2.Pin(map[string]string{"../x": sum("a")}); err == nil {
		t.Error("Pin accepted a path outside the directory")
	}
	if err := d2.Pin(map[string]string{"x": "abc"}); err == nil {
		t.Error("Pin accepted a short digest")
	}
}

// TestDebianIPXEPins checks the defaults against Debian's files when the
// installed ipxe package is the version they name (through Debian's own
// symlinks into /boot, as serve opens them).
func TestDebianIPXEPins(t *testing.T) {
	v, _ := exec.Command("dpkg-query", "-W", "-f=${Version}", "ipxe").Output()
	if string(v) != "1.0.0+git-20190125.36a4c85-5.1" {
		t.Logf("ipxe here is %q, not the version the pins name", v)
		return
	}
	d, err := New([]string{"/usr/lib/ipxe"}, []string{"/boot/ipxe.efi", "/boot/ipxe.lkrn"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Pin(DebianIPXEPins()); err != nil {
		t.Error(err)
	}
	if m := d.Missing(); len(m) > 0 {
		t.Errorf("Debian's ipxe lacks %v", m)
	}
}
