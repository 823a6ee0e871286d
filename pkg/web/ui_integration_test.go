//go:build integration

package web_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/web/webtest"
)

// ui is one browser tab of a test: a user at the dashboard.
type ui struct {
	t    *testing.T
	ctx  context.Context
	p    *webtest.Page
	base string
	art  string
}

func newUI(t *testing.T, ctx context.Context, p *webtest.Page, base, art string) *ui {
	return &ui{t: t, ctx: ctx, p: p, base: base, art: art}
}

// open loads a path of the dashboard.
func (u *ui) open(path string) {
	u.t.Helper()
	if err := u.p.Navigate(u.ctx, u.base+path); err != nil {
		u.t.Fatalf("opening %s: %v", path, err)
	}
}

func (u *ui) path() string {
	u.t.Helper()
	s, err := u.p.URL(u.ctx)
	if err != nil {
		u.t.Fatal(err)
	}
	return strings.TrimPrefix(s, u.base)
}

func (u *ui) fill(sel, v string) {
	u.t.Helper()
	if err := u.p.Fill(u.ctx, sel, v); err != nil {
		u.t.Fatal(err)
	}
}

func (u *ui) submit(sel string) {
	u.t.Helper()
	if err := u.p.Submit(u.ctx, sel); err != nil {
		u.t.Fatalf("submitting %s: %v", sel, err)
	}
}

func (u *ui) has(texts ...string) {
	u.t.Helper()
	if err := u.p.Has(u.ctx, texts...); err != nil {
		u.t.Errorf("%s: %v", u.path(), err)
	}
}

func (u *ui) count(sel string) int {
	u.t.Helper()
	n, err := u.p.Count(u.ctx, sel)
	if err != nil {
		u.t.Fatal(err)
	}
	return n
}

func (u *ui) text(sel string) string {
	u.t.Helper()
	s, err := u.p.Text(u.ctx, sel)
	if err != nil {
		u.t.Fatal(err)
	}
	return s
}

func (u *ui) eval(expr string, out any) {
	u.t.Helper()
	if err := u.p.Eval(u.ctx, expr, out); err != nil {
		u.t.Fatal(err)
	}
}

func (u *ui) waitFor(cond string, d time.Duration) {
	u.t.Helper()
	if err := u.p.WaitFor(u.ctx, cond, d); err != nil {
		u.t.Fatalf("%s: %v", u.path(), err)
	}
}

// shot saves a screenshot as a test artifact.
func (u *ui) shot(name string, full bool) {
	u.t.Helper()
	path := filepath.Join(u.art, name+".png")
	if err := u.p.Screenshot(u.ctx, path, full); err != nil {
		u.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	u.t.Logf("screenshot %s", path)
}

// clean fails the test for what went wrong in the page: a script error, a
// refused resource, a Content-Security-Policy violation.
func (u *ui) clean(allowed ...string) {
	u.t.Helper()
	for _, pr := range u.p.Problems() {
		ok := false
		for _, a := range allowed {
			ok = ok || strings.Contains(pr, a)
		}
		if !ok {
			u.t.Errorf("%s: %s", u.path(), pr)
		}
	}
}

// artifacts is where screenshots go: $INGOT_TEST_ARTIFACTS, else the
// repository's build/test-artifacts/web (ignored by git, kept after the
// test for people to look at).
func artifacts(t *testing.T) string {
	dir := os.Getenv("INGOT_TEST_ARTIFACTS")
	if dir == "" {
		root := filepath.Dir(filepath.Dir(mockup(t, "x"))) // testdata/redfish-mockups/x -> the repository
		dir = filepath.Join(filepath.Dir(root), "build", "test-artifacts", "web")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeCertPEM writes a TLS server's certificate, for the browser to pin.
func writeCertPEM(t *testing.T, c *x509.Certificate) string {
	path := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
