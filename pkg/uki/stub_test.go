package uki

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadStub(t *testing.T) {
	p := filepath.Join(t.TempDir(), "linuxx64.efi.stub")
	os.WriteFile(p, []byte("MZ stub bytes"), 0o644)
	sum := sha256.Sum256([]byte("MZ stub bytes"))
	pin := hex.EncodeToString(sum[:])
	if b, err := ReadStub(p, pin); err != nil || string(b) != "MZ stub bytes" {
		t.Fatalf("ReadStub(pinned) = %q, %v", b, err)
	}
	if _, err := ReadStub(p, ""); err != nil {
		t.Errorf("ReadStub without a pin = %v", err)
	}
	os.WriteFile(p, []byte("MZ other bytes"), 0o644)
	_, err := ReadStub(p, pin)
	if !errors.Is(err, ErrStubChanged) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "pinned "+pin) {
		t.Errorf("ReadStub of a changed stub = %v, want ErrStubChanged naming the file and the pin", err)
	}
	if _, err := ReadStub(filepath.Join(t.TempDir(), "none"), pin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadStub of a missing stub = %v", err)
	}
}

// TestDebianStubPins checks the defaults against this host's stubs where
// dpkg says they are the package version the pins name
// (systemd-boot-efi 252.39-1~deb12u2): a pin that does not match the
// package it names would refuse every UKI.
func TestDebianStubPins(t *testing.T) {
	checked := 0
	for _, arch := range []string{ArchAMD64, ArchARM64} {
		v, _ := exec.Command("dpkg-query", "-W", "-f=${Version}", "systemd-boot-efi:"+arch).Output()
		if string(v) != "252.39-1~deb12u2" {
			t.Logf("%s: systemd-boot-efi here is %q, not the pinned package version", arch, v)
			continue
		}
		if _, err := ReadStub(StubFor(arch), DebianStubSHA256(arch)); err != nil {
			t.Errorf("%s: %v", arch, err)
		}
		checked++
	}
	t.Logf("checked %d stubs", checked)
}
