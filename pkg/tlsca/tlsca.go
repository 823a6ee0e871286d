// Package tlsca is ingot's TLS: a small certificate authority kept in the
// data folder (made on first start when the operator brings no
// certificate), the server certificate it signs for the API listener,
// reloading on SIGHUP, and the pinned trust machines use: an agent knows
// the server only by the SHA-256 fingerprint of a certificate in the
// server's chain, handed to it on the kernel command line, and refuses any
// server whose chain does not contain that certificate.
//
// Files in the folder (Dir):
//
//	ca.pem     the CA certificate (public: give it to the CLI with --ca)
//	ca.key     the CA's private key (0600)
//	server.pem the server certificate followed by ca.pem (the served chain)
//	server.key its private key (0600)
package tlsca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// Lifetimes of what Ensure makes, and how early a server certificate is
// renewed before it expires.
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 365 * 24 * time.Hour
	RenewBefore    = 30 * 24 * time.Hour
)

// File names inside the folder.
const (
	CAFile     = "ca.pem"
	CAKeyFile  = "ca.key"
	ServerFile = "server.pem"
	ServerKey  = "server.key"
)

// Fingerprint is "sha256:" and the lower-case hex SHA-256 of a
// certificate's DER bytes: what `ingot serve` prints and machines pin.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseFingerprint checks s is a fingerprint as Fingerprint writes it
// (upper case and ':' separators, as openssl prints them, are accepted) and
// returns it in that form.
func ParseFingerprint(s string) (string, error) {
	h, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(s)), "sha256:")
	if !ok {
		h = strings.ToLower(strings.TrimSpace(s))
	}
	h = strings.ReplaceAll(h, ":", "")
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("certificate fingerprint %q: expected sha256: and 64 hex digits", s)
	}
	return "sha256:" + h, nil
}

// Ensure makes (or keeps) the CA and a server certificate in dir for hosts
// (IP addresses and DNS names; the server certificate is issued again when
// one is missing from it or it expires within RenewBefore) and returns the
// chain to serve and the CA. A damaged or foreign file is named, never
// replaced: the operator decides.
func Ensure(dir string, hosts []string, now time.Time) (*tls.Certificate, *x509.Certificate, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("tls: making %s: %w", dir, err)
	}
	ca, caKey, err := ensureCA(dir, now)
	if err != nil {
		return nil, nil, err
	}
	certPath, keyPath := filepath.Join(dir, ServerFile), filepath.Join(dir, ServerKey)
	if c, err := LoadPair(certPath, keyPath); err == nil && covers(c.Leaf, hosts) &&
		c.Leaf.NotAfter.Sub(now) > RenewBefore && c.Leaf.CheckSignatureFrom(ca) == nil {
		return c, ca, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: making the server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "ingot server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(ServerLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: signing the server certificate: %w", err)
	}
	chain := append(pemBlock("CERTIFICATE", der), pemBlock("CERTIFICATE", ca.Raw)...)
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writeFile(certPath, chain, 0o644); err != nil {
		return nil, nil, err
	}
	c, err := LoadPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	return c, ca, nil
}

// ensureCA loads dir's CA or makes one.
func ensureCA(dir string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if _, err := os.Stat(certPath); err == nil {
		pair, err := LoadPair(certPath, keyPath)
		if err != nil {
			return nil, nil, err
		}
		signer, ok := pair.PrivateKey.(crypto.Signer)
		if !ok || !pair.Leaf.IsCA {
			return nil, nil, fmt.Errorf("tls: %s is not a CA certificate with its key in %s", certPath, keyPath)
		}
		return pair.Leaf, signer, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: making the CA key: %w", err)
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "ingot CA " + host, Organization: []string{"ingot"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: making the CA certificate: %w", err)
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writeFile(certPath, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

// LoadPair reads a PEM certificate chain and its key, naming the file that
// is missing or wrong. Leaf is set.
func LoadPair(certPath, keyPath string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("tls: reading the certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("tls: reading the key: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls: %s with %s: %w", certPath, keyPath, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: %s: %w", certPath, err)
		}
	}
	return &c, nil
}

// Top is the certificate machines pin for chain: the last one served (the
// CA with Ensure's chain; the leaf when a chain is a single certificate).
func Top(chain *tls.Certificate) (*x509.Certificate, error) {
	if chain == nil || len(chain.Certificate) == 0 {
		return nil, errors.New("tls: no certificate")
	}
	return x509.ParseCertificate(chain.Certificate[len(chain.Certificate)-1])
}

// covers reports whether cert names every host.
func covers(cert *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(cert.DNSNames, h) {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("tls: encoding %s: %w", path, err)
	}
	return writeFile(path, pemBlock("PRIVATE KEY", der), 0o600)
}

// writeFile replaces path whole (pkg/durable).
func writeFile(path string, b []byte, mode os.FileMode) error {
	if err := durable.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return nil
}

// Holder serves the current certificate and swaps it on Reload (SIGHUP);
// a failed reload keeps the old one.
type Holder struct {
	cur  atomic.Pointer[tls.Certificate]
	load func() (*tls.Certificate, error)
}

// NewHolder loads the first certificate with load.
func NewHolder(load func() (*tls.Certificate, error)) (*Holder, error) {
	h := &Holder{load: load}
	return h, h.Reload()
}

// Reload loads the certificate again.
func (h *Holder) Reload() error {
	c, err := h.load()
	if err != nil {
		return err
	}
	h.cur.Store(c)
	return nil
}

// Current is the certificate served now.
func (h *Holder) Current() *tls.Certificate { return h.cur.Load() }

// ServerConfig is the API listener's TLS: TLS 1.2 or newer, the holder's
// current certificate on every handshake.
func (h *Holder) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return h.cur.Load(), nil
		},
	}
}

// Pinned is a client TLS configuration that trusts exactly one
// certificate: fingerprint (see Fingerprint) must be the server's leaf or
// a certificate in the chain it presents, and the leaf must be signed
// through that chain by it and valid now. Host names are not checked: the
// fingerprint, handed out by the server machines already trust to boot
// them, is the identity.
func Pinned(fingerprint string) (*tls.Config, error) {
	fp, err := ParseFingerprint(fingerprint)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, fp, time.Now())
		},
	}, nil
}

// verifyPinned is Pinned's check of a presented chain.
func verifyPinned(chain []*x509.Certificate, fp string, now time.Time) error {
	if len(chain) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf := chain[0]
	for i, c := range chain {
		if Fingerprint(c) != fp {
			continue
		}
		if i == 0 {
			if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
				return fmt.Errorf("the server's pinned certificate is not valid now (valid %s to %s)", leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
			}
			return nil
		}
		roots, inter := x509.NewCertPool(), x509.NewCertPool()
		roots.AddCert(c)
		for _, m := range chain[1:i] {
			inter.AddCert(m)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return &PinError{Want: fp, Got: []string{Fingerprint(leaf) + " (" + err.Error() + ")"}}
		}
		return nil
	}
	var got []string
	for _, c := range chain {
		got = append(got, Fingerprint(c))
	}
	return &PinError{Want: fp, Got: got}
}

// PinError is a server whose chain lacks the pinned certificate: not a
// network fault, so callers do not retry it.
type PinError struct {
	Want string
	Got  []string
}

func (e *PinError) Error() string {
	return fmt.Sprintf("the server is not the one this machine was told to trust: expected a certificate %s in its chain, got %s",
		e.Want, strings.Join(e.Got, ", "))
}

// PEM returns cert as PEM (for ca.pem written into an installed system).
func PEM(cert *x509.Certificate) []byte { return pemBlock("CERTIFICATE", cert.Raw) }
