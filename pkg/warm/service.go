package warm

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Boot is what the node kexecs into: the agent of its iPXE script.
type Boot struct {
	KernelURL, InitrdURL string
	Cmdline              string
}

// ParseScript reads the kernel, initrd and command line of an agent iPXE
// script (httpboot.RenderAgent's form). A script that boots the local disk,
// exits or shows an error is not an agent boot: its error says which, so
// the node logs why it did not kexec (the machine is not in a job, or the
// server refused it a credential).
func ParseScript(b []byte) (Boot, error) {
	if !bytes.HasPrefix(b, []byte("#!ipxe")) {
		return Boot{}, errors.New("not an iPXE script (no #!ipxe line)")
	}
	var out Boot
	var why string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "kernel":
			if len(f) < 2 {
				return Boot{}, errors.New("kernel line without a URL")
			}
			out.KernelURL = f[1]
			var args []string
			for _, a := range f[2:] {
				if !strings.HasPrefix(a, "initrd=") { // for the EFI stub only
					args = append(args, a)
				}
			}
			out.Cmdline = strings.Join(args, " ")
		case "initrd":
			// initrd [--name NAME] URL
			if len(f) < 2 {
				return Boot{}, errors.New("initrd line without a URL")
			}
			out.InitrdURL = f[len(f)-1]
		case "echo":
			why = strings.Join(f[1:], " ")
		case "sanboot", "exit":
			if why == "" {
				why = "the script boots the local disk (is the machine in a reimage job?)"
			}
		}
	}
	switch {
	case out.KernelURL == "" && why != "":
		return Boot{}, errors.New(why)
	case out.KernelURL == "":
		return Boot{}, errors.New("the script names no kernel")
	case out.InitrdURL == "":
		return Boot{}, errors.New("the script names no initrd")
	}
	for _, u := range []string{out.KernelURL, out.InitrdURL} {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") {
			return Boot{}, fmt.Errorf("%q: expected an http(s) URL", u)
		}
	}
	return out, nil
}

// Service is the installed system's ingot service: it answers signed
// requests (Path) and kexecs into the agent.
type Service struct {
	cfg  Config
	pub  []byte
	log  *slog.Logger
	now  func() time.Time
	http *http.Client
	dir  string
	// Kexec loads kernel and initrd (local files) and jumps; it returns
	// only on failure. Tests replace it.
	Kexec func(kernel, initrd, cmdline string) error

	mu   sync.Mutex
	seen *nonces // taken, until their request expires; kept in a file
	busy bool
}

// Options are the service's local settings.
type Options struct {
	// Dir holds the downloaded kernel and initrd (a tmpfs: /run).
	Dir string
	// Nonces is the file of the nonces taken (NoncePath), so that a
	// restart of the service does not take a request a second time.
	Nonces string
	// Kexec loads kernel and initrd and jumps (pid1.Kexec).
	Kexec  func(kernel, initrd, cmdline string) error
	Logger *slog.Logger
}

// NewService builds the service from the installed system's Config and
// reads the nonces it has taken before.
func NewService(cfg Config, opt Options) (*Service, error) {
	pub, err := cfg.PublicKey()
	if err != nil {
		return nil, err
	}
	if opt.Dir == "" || opt.Nonces == "" {
		return nil, errors.New("warm service: a download folder and a nonce file are required")
	}
	seen, err := loadNonces(opt.Nonces)
	if err != nil {
		return nil, err
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, pub: pub, log: log, now: time.Now, dir: opt.Dir, Kexec: opt.Kexec, seen: seen,
		http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{Proxy: nil}}}, nil
}

// ServeHTTP answers POST Path: 202 and a kexec into the agent, or why not.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path || r.Method != http.MethodPost {
		http.Error(w, "POST "+Path+" only", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil || len(body) > MaxBody {
		http.Error(w, "request body: expected at most 4 KiB of JSON", http.StatusBadRequest)
		return
	}
	req, err := Verify(s.pub, body, r.Header.Get(SignatureHeader), s.cfg.Machine, s.now())
	if err != nil {
		s.log.Warn("warm reimage request refused", "from", r.RemoteAddr, "err", err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	s.mu.Lock()
	busy := s.busy
	var fresh bool
	if !busy {
		fresh, err = s.seen.take(req.Nonce, req.NotAfter, s.now())
		s.busy = fresh
	}
	s.mu.Unlock()
	switch {
	case busy:
		http.Error(w, "a warm reimage is already under way", http.StatusConflict)
		return
	case err != nil:
		s.log.Error("warm reimage request refused", "job", req.Job, "err", err)
		http.Error(w, err.Error()+": refused, since a request whose nonce is not kept could be taken again", http.StatusServiceUnavailable)
		return
	case !fresh:
		http.Error(w, "request already used (nonce seen)", http.StatusConflict)
		return
	}
	s.log.Info("warm reimage: kexec into the agent", "job", req.Job)
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "kexec into the agent for job %s\n", req.Job)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	go func() {
		err := s.kexecAgent(context.WithoutCancel(r.Context()))
		s.log.Error("warm reimage failed; the server falls back to its BMC", "job", req.Job, "err", err)
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}()
}

// kexecAgent fetches the machine's iPXE script, the kernel and initrd it
// names (checked against the sha256 in their /artifacts/sha256/ URLs) and
// kexecs. It returns only on failure.
func (s *Service) kexecAgent(ctx context.Context) error {
	script, err := s.get(ctx, strings.TrimSuffix(s.cfg.Server, "/")+"/ipxe?mac="+url.QueryEscape(s.cfg.MAC), 64<<10)
	if err != nil {
		return fmt.Errorf("fetching the iPXE script: %w", err)
	}
	b, err := ParseScript(script)
	if err != nil {
		return fmt.Errorf("iPXE script: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	files := map[string]string{}
	for name, u := range map[string]string{"vmlinuz": b.KernelURL, "initrd.img": b.InitrdURL} {
		data, err := s.get(ctx, u, 2<<30)
		if err != nil {
			return fmt.Errorf("fetching %s: %w", name, err)
		}
		if want := path.Base(u); strings.Contains(u, "/artifacts/sha256/") {
			if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want {
				return fmt.Errorf("%s from %s: sha256 %x, expected %s", name, u, sum, want)
			}
		}
		p := path.Join(s.dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return err
		}
		files[name] = p
	}
	return s.Kexec(files["vmlinuz"], files["initrd.img"], b.Cmdline)
}

func (s *Service) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(msg)))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s: more than %d bytes", u, limit)
	}
	return b, err
}

// TLSConfig is the service's TLS: a self-signed certificate made at each
// start (the server does not verify it; see the package comment).
func TLSConfig(host string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "ingot warm reimage " + host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0), DNSNames: []string{host},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}

// Trigger sends a signed request to the node's service at addr (host:port)
// and waits at most timeout for its 202. Any other answer, or none, is an
// error naming it: the caller falls back to the BMC.
func Trigger(ctx context.Context, addr string, body []byte, sig string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, sig)
	// The node's certificate is self-signed and not verified: the request
	// is signed and carries no secret (see the package comment).
	c := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec
	var resp *http.Response
	for {
		// A node that has just booted may not listen yet: a refused
		// connection is tried again, each second, until the timeout.
		req.Body = io.NopCloser(bytes.NewReader(body))
		resp, err = c.Do(req)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm reimage service at %s: %w", addr, err)
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return fmt.Errorf("warm reimage service at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("warm reimage service at %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
