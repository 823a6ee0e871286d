package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLS is a CA made for one test, a server certificate for 127.0.0.1 and a
// client certificate, as PEM files, for a cluster that serves clients over
// TLS and checks their certificates (etcd --client-cert-auth).
type TLS struct {
	CACert                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// Client is the client side: the CA and the client certificate.
	Client *tls.Config
}

// NewTLS makes the files under t.TempDir().
func NewTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caDER := newCert(t, "ingot test CA", nil, nil, true)
	out := &TLS{CACert: writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	srvKey, _, srvDER := newCert(t, "etcd", caCert, caKey, false)
	out.ServerCert = writePEM(t, dir, "server.pem", "CERTIFICATE", srvDER)
	out.ServerKey = writeKey(t, dir, "server-key.pem", srvKey)
	cliKey, _, cliDER := newCert(t, "ingot", caCert, caKey, false)
	out.ClientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	out.ClientKey = writeKey(t, dir, "client-key.pem", cliKey)
	pair, err := tls.LoadX509KeyPair(out.ClientCert, out.ClientKey)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	out.Client = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return out
}

// newCert makes a key and a certificate for name, signed by parent (self
// signed when nil), valid for 127.0.0.1 and localhost.
func newCert(t testing.TB, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return key, cert, der
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return path
}

func writeKey(t testing.TB, dir, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return writePEM(t, dir, name, "EC PRIVATE KEY", der)
}
