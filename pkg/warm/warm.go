// Package warm is the warm reimage: a reimage without a single POST. A
// recipe opts in (os.warm_reimage); the agent then writes this server's
// public key and the machine's identity into the installed system
// (ConfigPath), whose ingot service (`ingot-agent warm`, the agent binary
// in another mode) listens on Port over TLS. To reimage, the server sends
// it a Request signed with its private key; the service checks the
// signature, the machine and the age, answers 202, fetches the machine's
// iPXE script from the boot listener as the firmware would (the boot
// credential in it is issued, as always, only to the address tied to the
// machine's MAC), downloads the kernel and initrd it names, checks their
// sha256 and kexecs into the agent. The agent writes the image and hands
// off (kexec) into the new OS: no firmware runs at all.
//
// What the signature buys: nobody but this server can make a production
// node drop its workload and reboot; a captured request is refused after
// MaxAge and a second time within it (its nonce, kept in a file so that a
// restart of the service does not forget it; nonces.go). The listener cuts
// slow and idle clients and caps connections per address (listen.go).
// What it does not: the server does not verify the node's TLS certificate
// (it is self-signed at each start, and the request carries no secret); a
// node impersonated on the boot network gets at most what its iPXE script
// would give, the same exposure as a network boot.
package warm

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// Defaults and names shared by the server and the node's service.
const (
	// Port is where the installed system's ingot service listens (TLS).
	Port = 9443
	// Path is the service's one route: POST a signed Request.
	Path = "/v1/kexec"
	// SignatureHeader carries the request body's ed25519 signature (base64).
	SignatureHeader = "X-Ingot-Signature"
	// ConfigPath is the service's settings in the installed system.
	ConfigPath = "/etc/ingot/warm.json"
	// MaxAge bounds how long a signed request is good for.
	MaxAge = 2 * time.Minute
	// MaxBody bounds a request body.
	MaxBody = 4 << 10
)

// Config is what the installed system keeps (ConfigPath), written by the
// agent during the image step.
type Config struct {
	Server  string `json:"server"`  // the boot listener, e.g. http://10.77.0.1:8080
	Machine string `json:"machine"` // the machine's ID at ingot
	MAC     string `json:"mac"`     // the boot NIC's MAC: its iPXE script's key
	Key     string `json:"key"`     // the server's ed25519 public key, base64
	Port    int    `json:"port"`
}

// ParseConfig reads a Config and checks every field; errors name the field.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("warm config: %w", err)
	}
	switch {
	case !strings.HasPrefix(c.Server, "http://") && !strings.HasPrefix(c.Server, "https://"):
		return c, fmt.Errorf("warm config: server %q: expected the boot listener's http:// URL", c.Server)
	case c.Machine == "":
		return c, errors.New("warm config: machine: expected the machine's ID")
	case c.MAC == "":
		return c, errors.New("warm config: mac: expected the boot NIC's MAC")
	case c.Port <= 0 || c.Port > 65535:
		return c, fmt.Errorf("warm config: port %d: expected 1-65535", c.Port)
	}
	if _, err := c.PublicKey(); err != nil {
		return c, err
	}
	return c, nil
}

// PublicKey decodes Key.
func (c Config) PublicKey() (ed25519.PublicKey, error) {
	k, err := base64.StdEncoding.DecodeString(c.Key)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("warm config: key: expected a base64 ed25519 public key (%d bytes)", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(k), nil
}

// Request asks a node to kexec into the agent for a job.
type Request struct {
	Machine  string    `json:"machine"`
	Job      string    `json:"job"`
	Nonce    string    `json:"nonce"`
	NotAfter time.Time `json:"not_after"`
}

// Sign makes a request's body and signature.
func Sign(key ed25519.PrivateKey, machineID, jobID string, now time.Time) (body []byte, sig string) {
	n := make([]byte, 16)
	_, _ = rand.Read(n)
	body, _ = json.Marshal(Request{Machine: machineID, Job: jobID, Nonce: hex.EncodeToString(n), NotAfter: now.Add(MaxAge).UTC()})
	return body, base64.StdEncoding.EncodeToString(ed25519.Sign(key, body))
}

// Verify checks a request: the signature by pub, the machine, and that it
// is not expired nor good for longer than MaxAge (a clock far ahead at the
// server would otherwise mint long-lived requests).
func Verify(pub ed25519.PublicKey, body []byte, sig, machineID string, now time.Time) (Request, error) {
	s, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(s) != ed25519.SignatureSize {
		return Request{}, errors.New("signature: expected a base64 ed25519 signature")
	}
	if !ed25519.Verify(pub, body, s) {
		return Request{}, errors.New("signature: not made by this node's ingot server")
	}
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		return Request{}, fmt.Errorf("request: %w", err)
	}
	switch {
	case r.Machine != machineID:
		return r, fmt.Errorf("request for machine %q; this is %q", r.Machine, machineID)
	case r.Nonce == "" || r.Job == "":
		return r, errors.New("request: expected a job and a nonce")
	case now.After(r.NotAfter):
		return r, fmt.Errorf("request expired at %s (now %s)", r.NotAfter.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case r.NotAfter.Sub(now) > MaxAge+time.Minute:
		return r, fmt.Errorf("request good until %s, more than %s ahead: refused (check the clocks)", r.NotAfter.Format(time.RFC3339), MaxAge)
	}
	return r, nil
}

// LoadOrCreateKey reads the server's private key (a base64 ed25519 seed)
// from path, making one (mode 0600) when there is none.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, err
		}
		if err := durable.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("writing the warm reimage key %s: %w", path, err)
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the warm reimage key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("warm reimage key %s: expected a base64 %d-byte ed25519 seed (remove the file to make a new key; installed systems then need a reimage to learn it)", path, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// EncodePublic is pub as Config.Key holds it.
func EncodePublic(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }
