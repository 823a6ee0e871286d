package webtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// Program is Debian's Chromium.
const Program = "chromium"

// Browser is one headless Chromium with a fresh profile.
type Browser struct {
	c   *conn
	cmd *exec.Cmd
	log *Buffer
}

// Options start a Browser.
type Options struct {
	// TrustCAs are PEM files whose certificates' public keys Chromium
	// accepts in a chain it cannot verify otherwise
	// (--ignore-certificate-errors-spki-list): ingot's CA, and nothing
	// else.
	TrustCAs []string
	// Args are more command-line flags.
	Args []string
}

// SPKIHashes returns the base64 SHA-256 of each certificate's public key
// in a PEM file, as --ignore-certificate-errors-spki-list takes them.
func SPKIHashes(pemFile string) ([]string, error) {
	b, err := os.ReadFile(pemFile)
	if err != nil {
		return nil, err
	}
	var out []string
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pemFile, err)
		}
		sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		out = append(out, base64.StdEncoding.EncodeToString(sum[:]))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no certificate", pemFile)
	}
	return out, nil
}

// Start starts Chromium (the test needs it on PATH: netnstest.NeedPrograms)
// and stops it when the test ends.
func Start(t testing.TB, o Options) *Browser {
	t.Helper()
	netnstest.NeedPrograms(t, Program)
	dir := t.TempDir()
	args := []string{"--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		// Without these Chromium calls Google's services at start, which
		// this machine's closed network refuses.
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-domain-reliability", "--disable-client-side-phishing-detection", "--metrics-recording-only",
		"--hide-scrollbars", "--mute-audio", "--user-data-dir=" + dir,
		"--remote-debugging-port=0", "--remote-allow-origins=http://127.0.0.1", "--window-size=1280,900"}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox") // Chromium's sandbox refuses to run as root
	}
	var spki []string
	for _, f := range o.TrustCAs {
		hs, err := SPKIHashes(f)
		if err != nil {
			t.Fatal(err)
		}
		spki = append(spki, hs...)
	}
	if len(spki) > 0 {
		args = append(args, "--ignore-certificate-errors-spki-list="+strings.Join(spki, ","))
	}
	args = append(append(args, o.Args...), "about:blank")
	b := &Browser{log: &Buffer{}}
	b.cmd = exec.Command(Program, args...)
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", Program, err)
	}
	t.Cleanup(b.stop)
	url, err := devtoolsURL(dir, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\nchromium's output:\n%s", err, b.log)
	}
	if b.c, err = dial(url); err != nil {
		t.Fatal(err)
	}
	return b
}

// devtoolsURL reads the browser's DevTools endpoint from the profile's
// DevToolsActivePort (port, then path), written once it listens.
func devtoolsURL(dir string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join(dir, "DevToolsActivePort"))
		if lines := strings.Fields(string(b)); err == nil && len(lines) == 2 {
			return "ws://127.0.0.1:" + lines[0] + lines[1], nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("chromium wrote no DevToolsActivePort within %s", wait)
}

func (b *Browser) stop() {
	if b.c != nil {
		_ = b.c.call(context.Background(), "", "Browser.close", nil, nil)
		b.c.close()
	}
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

// Log is what Chromium printed.
func (b *Browser) Log() string { return b.log.String() }

// NewPage opens a tab in a browser context of its own (its own cookies:
// two pages are two users).
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	var bc struct {
		BrowserContextID string `json:"browserContextId"`
	}
	if err := b.c.call(ctx, "", "Target.createBrowserContext", map[string]any{"disposeOnDetach": true}, &bc); err != nil {
		return nil, err
	}
	return b.newTab(ctx, bc.BrowserContextID)
}

// Sibling opens another tab in p's browser context: the same cookies, the
// same user.
func (b *Browser) Sibling(ctx context.Context, p *Page) (*Page, error) {
	return b.newTab(ctx, p.browserContext)
}

func (b *Browser) newTab(ctx context.Context, browserContext string) (*Page, error) {
	var tg struct {
		TargetID string `json:"targetId"`
	}
	if err := b.c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": browserContext}, &tg); err != nil {
		return nil, err
	}
	var at struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tg.TargetID, "flatten": true}, &at); err != nil {
		return nil, err
	}
	p := &Page{c: b.c, session: at.SessionID, target: tg.TargetID, browserContext: browserContext}
	p.stopLog = b.c.listen(p.collect)
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if err := b.c.call(ctx, p.session, m, nil, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Buffer collects a process's output for a failing test: safe for
// concurrent writes.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var errTimeout = errors.New("timed out")
