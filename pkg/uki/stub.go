package uki

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// ErrStubChanged says an EFI stub's bytes are not the pinned ones. Test
// with errors.Is.
var ErrStubChanged = errors.New("EFI stub changed")

// DebianStubSHA256 are the sha256s of systemd's EFI stubs in Debian 12's
// systemd-boot-efi 252.39-1~deb12u2, by architecture (EFIStub,
// EFIStubARM64). Another package version has other bytes: configure its
// pin.
func DebianStubSHA256(arch string) string {
	if arch == ArchARM64 {
		return "e937f97467a4cebf48189e1f1348025c03d69bdee82a31cb2cf7e8307cb51dbf"
	}
	return "c62ae56ffaf49d1a61de4434f4f531dd1d4ed3b5aee46c934c56e3f809b22cc4"
}

// ReadStub reads the EFI stub at path and, when want is not empty, refuses
// it unless its sha256 is want: a UKI is never built on a stub whose bytes
// changed. The error names the file, its digest and the pin.
func ReadStub(path, want string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if want == "" {
		return b, nil
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("EFI stub %s has sha256 %s, pinned %s: %w", path, got, want, ErrStubChanged)
	}
	return b, nil
}
