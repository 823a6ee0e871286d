// Package secret seals the secrets ingot keeps (BMC credentials) with
// XChaCha20-Poly1305 under a key that lives in its own file, never in the
// database: a copy of the database (a backup, a stolen disk image of the
// data folder without the key file) holds only ciphertext and the ID of
// the key it needs.
//
// The key file (default DATA/secrets.key, mode 0600) holds one key per
// line, "ingot-secret-key v1 ID BASE64"; the last line is the key new
// secrets are sealed with. Rotation appends a new key, re-seals every
// secret in one store write, then drops the old keys.
//
// A sealed value is a 24-byte random nonce followed by the ciphertext and
// tag; the store keeps the sealing key's ID beside it. The secret's name
// is the additional data, so a value copied under another name does not
// open.
package secret

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// ErrWrongKey: the key a secret was sealed with is not in the key file.
var ErrWrongKey = errors.New("the key that sealed this secret is not in the key file")

const header = "ingot-secret-key v1"

type key struct {
	id  string
	raw []byte
}

// Keyring is the keys of one key file; the last is current.
type Keyring struct {
	path string
	keys []key
}

// KeyID is the ID of a key: the first 8 bytes of its SHA-256, in hex.
func keyID(raw []byte) string {
	sum := sha256.Sum256(append([]byte("ingot secret key id\x00"), raw...))
	return hex.EncodeToString(sum[:8])
}

// Load reads the key file at path, making it with one fresh key (0600)
// when it does not exist. A file others may read, or a damaged line, is
// refused with the file and line named.
func Load(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k := &Keyring{path: path}
		if err := k.add(); err != nil {
			return nil, err
		}
		return k, k.write()
	}
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret key file %s: mode %v lets others read the key; expected 0600 (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	k := &Keyring{path: path}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, header+" ")
		id, enc, ok2 := strings.Cut(rest, " ")
		raw, derr := base64.StdEncoding.DecodeString(enc)
		if !ok || !ok2 || derr != nil || len(raw) != chacha20poly1305.KeySize || keyID(raw) != id {
			return nil, fmt.Errorf("secret key file %s line %d: expected %q, an ID and a base64 %d-byte key whose ID matches", path, n, header, chacha20poly1305.KeySize)
		}
		k.keys = append(k.keys, key{id, raw})
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("secret key file %s: no key in it", path)
	}
	return k, nil
}

// Path is the key file.
func (k *Keyring) Path() string { return k.path }

// Current is the ID of the key new secrets are sealed with.
func (k *Keyring) Current() string { return k.keys[len(k.keys)-1].id }

// IDs lists every key's ID, oldest first.
func (k *Keyring) IDs() []string {
	var ids []string
	for _, kk := range k.keys {
		ids = append(ids, kk.id)
	}
	return ids
}

// Seal encrypts value for the secret name with the current key.
func (k *Keyring) Seal(name string, value []byte) (keyID string, sealed []byte, err error) {
	cur := k.keys[len(k.keys)-1]
	aead, err := chacha20poly1305.NewX(cur.raw)
	if err != nil {
		return "", nil, err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(value)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, err
	}
	return cur.id, aead.Seal(nonce, nonce, value, []byte(name)), nil
}

// Open decrypts the secret name sealed with the key keyID.
func (k *Keyring) Open(name, keyID string, sealed []byte) ([]byte, error) {
	for _, kk := range k.keys {
		if kk.id != keyID {
			continue
		}
		aead, err := chacha20poly1305.NewX(kk.raw)
		if err != nil {
			return nil, err
		}
		if len(sealed) < aead.NonceSize()+aead.Overhead() {
			return nil, fmt.Errorf("secret %s: sealed value too short (%d bytes)", name, len(sealed))
		}
		out, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(name))
		if err != nil {
			return nil, fmt.Errorf("secret %s: does not open with key %s (damaged, or stored under another name)", name, keyID)
		}
		return out, nil
	}
	return nil, fmt.Errorf("secret %s: sealed with key %s, the key file %s has %s: %w", name, keyID, k.path, strings.Join(k.IDs(), ", "), ErrWrongKey)
}

// BeginRotation appends a fresh key (the new current) to the key file, so
// a crash at any later point leaves every secret openable.
func (k *Keyring) BeginRotation() error {
	if err := k.add(); err != nil {
		return err
	}
	return k.write()
}

// FinishRotation drops every key but the current from the key file; call
// it once every secret is sealed with the current key.
func (k *Keyring) FinishRotation() error {
	k.keys = k.keys[len(k.keys)-1:]
	return k.write()
}

func (k *Keyring) add() error {
	raw := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("making a secret key: %w", err)
	}
	k.keys = append(k.keys, key{keyID(raw), raw})
	return nil
}

// write replaces the key file atomically, 0600.
func (k *Keyring) write() error {
	var b strings.Builder
	b.WriteString("# ingot's secret keys (pkg/secret): keep this file apart from backups of the database.\n")
	for _, kk := range k.keys {
		fmt.Fprintf(&b, "%s %s %s\n", header, kk.id, base64.StdEncoding.EncodeToString(kk.raw))
	}
	if err := os.MkdirAll(filepath.Dir(k.path), 0o700); err != nil {
		return fmt.Errorf("secret key file: %w", err)
	}
	if err := durable.WriteFile(k.path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("secret key file: %w", err)
	}
	return nil
}
