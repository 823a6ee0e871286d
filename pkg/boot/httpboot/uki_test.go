package httpboot

import (
	"bytes"
	"context"
	"debug/pe"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/uki/ukitest"
)

// ukiSections reads the sections a UKI adds to the stub.
func ukiSections(t *testing.T, body []byte) map[string]string {
	t.Helper()
	f, err := pe.NewFile(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the UKI is not a PE image: %v", err)
	}
	out := map[string]string{}
	for _, s := range f.Sections[1:] { // [0] is the stub's .text
		d, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		out[s.Name] = string(d[:s.VirtualSize])
	}
	return out
}

// TestUKI: /uki/MAC.efi decides as /ipxe does. A machine the engine works
// on gets the agent (its recipe's kernel, initrd and command line, with its
// MAC and no boot credential: the agent asks for that by MAC); an unknown
// or discovered one the discovery agent; the rest a 404, so the firmware
// boots its next option.
func TestUKI(t *testing.T) {
	agent := "ingot.server=http://10.77.0.1:8080 ingot.mac=52:54:00:00:00:01 ingot.machine=m-0001 console=ttyS0 panic=-1"
	tests := map[string]struct {
		unknown, path string
		code          int
		cmdline       string // 200 only
		kernel        string
		body          string // what a refusal says
	}{
		"agent":           {path: "/uki/52-54-00-00-00-01.efi", code: 200, cmdline: agent, kernel: "fake kernel"},
		"agent, colons":   {path: "/uki/52:54:00:00:00:01.efi", code: 200, cmdline: agent, kernel: "fake kernel"},
		"ready":           {path: "/uki/52-54-00-00-00-02.efi", code: 404, body: "node2 is ready: boot from local disk"},
		"recipe missing":  {path: "/uki/52-54-00-00-00-04.efi", code: 503, body: "recipe missing"},
		"unknown":         {path: "/uki/52-54-00-00-00-99.efi", code: 200, cmdline: "ingot.server=http://10.77.0.1:8080 ingot.mode=discovery ingot.mac=52:54:00:00:00:99 console=ttyS0", kernel: "fake kernel"},
		"discovered":      {path: "/uki/52-54-00-00-00-05.efi", code: 200, cmdline: "ingot.server=http://10.77.0.1:8080 ingot.mode=discovery ingot.mac=52:54:00:00:00:05 console=ttyS0", kernel: "fake kernel"},
		"unknown, ignore": {unknown: UnknownIgnore, path: "/uki/52-54-00-00-00-99.efi", code: 404, body: "policy ignore"},
		"not a MAC":       {path: "/uki/node1.efi", code: 404, body: "expected /uki/MAC.efi"},
		"no .efi":         {path: "/uki/52-54-00-00-00-01", code: 404, body: "expected /uki/MAC.efi"},
		"not under /uki/": {path: "/uki/52-54-00-00-00-01/x.efi", code: 404},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.unknown)
			resp, body := f.get(t, tc.path, nil)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, body)
			}
			if tc.code != 200 {
				if !strings.Contains(string(body), tc.body) {
					t.Errorf("refusal %q does not say %q", body, tc.body)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/efi" {
				t.Errorf("Content-Type %q, want application/efi (EDK2 tells an EFI application by it)", ct)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			s := ukiSections(t, body)
			if d := cmp.Diff(tc.cmdline, s[".cmdline"]); d != "" {
				t.Errorf(".cmdline (-want +got):\n%s", d)
			}
			if strings.Contains(s[".cmdline"], "ingot.token") {
				t.Error("a UKI carries a credential")
			}
			if s[".linux"] != tc.kernel || s[".initrd"] != "fake initrd" || !strings.Contains(s[".osrel"], "ID=ingot-agent") {
				t.Errorf("sections %q", s)
			}
		})
	}
}

// EDK2 asks HEAD first (size and type), then GET; a resumed download asks
// a Range with If-Range. The answers agree with each other.
func TestUKIHeadRange(t *testing.T) {
	f := newFixture(t, "")
	path := "/uki/52-54-00-00-00-01.efi"
	full, body := f.get(t, path, nil)
	req, _ := http.NewRequest("HEAD", f.srv.URL+path, nil)
	head, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head.Body.Close()
	if head.StatusCode != 200 || head.ContentLength != int64(len(body)) || head.Header.Get("Content-Type") != "application/efi" {
		t.Errorf("HEAD: %d, %d bytes, %q; GET gave %d bytes", head.StatusCode, head.ContentLength, head.Header.Get("Content-Type"), len(body))
	}
	etag := full.Header.Get("ETag")
	if etag == "" || head.Header.Get("ETag") != etag {
		t.Errorf("ETag %q on GET, %q on HEAD: want one and the same", etag, head.Header.Get("ETag"))
	}
	part, got := f.get(t, path, map[string]string{"Range": "bytes=1000-", "If-Range": etag})
	if part.StatusCode != 206 || !bytes.Equal(got, body[1000:]) {
		t.Errorf("Range from 1000: %d, %d bytes, want 206 and %d bytes", part.StatusCode, len(got), len(body)-1000)
	}
	// Another machine's UKI differs only in its command line: another ETag.
	other, _ := f.get(t, "/uki/52-54-00-00-00-99.efi", nil)
	if other.Header.Get("ETag") == etag {
		t.Error("two command lines, one ETag")
	}
}

// Without the stub, or with a recipe whose agent is a URL, /uki says why
// with 503 (there is something to boot, but no UKI to build).
func TestUKICannotBuild(t *testing.T) {
	arts, _ := artifact.Open(t.TempDir())
	k, _ := arts.Put(context.Background(), strings.NewReader("kernel"))
	rc := &recipe.Recipe{Name: "r", Version: "1"}
	rc.OS.Agent = recipe.AgentBoot{Kernel: recipe.Artifact{SHA256: k.SHA256}, Initrd: recipe.Artifact{Path: "http://mirror/initrd"}}
	changed := filepath.Join(t.TempDir(), "linuxx64.efi.stub")
	os.WriteFile(changed, []byte("MZ a stub after an upgrade"), 0o644)
	for name, c := range map[string]struct {
		stub, pin, mac, want string
	}{
		"no stub":   {"/nonexistent/linuxx64.efi.stub", "", "52-54-00-00-00-77", "no EFI stub"},
		"URL agent": {"", "", "52-54-00-00-00-02", "a UKI is built from the artifact store"},
		// The stub is a first stage: bytes other than the pinned ones are
		// never handed out.
		"changed stub": {changed, strings.Repeat("0", 64), "52-54-00-00-00-77", "EFI stub changed since it was pinned"},
	} {
		t.Run(name, func(t *testing.T) {
			fp := "sha256:" + strings.Repeat("ab", 32)
			h, err := New(Config{ServerURL: "http://10.77.0.1:8080", APIURL: "https://10.77.0.1:8443", CAFingerprint: fp,
				Machines: fakeMachines{
					"52:54:00:00:00:02": {ID: "m-2", Name: "n2", Recipe: "r", State: machine.StateProvisioning},
				},
				Recipes: func(string) (*recipe.Recipe, error) { return rc, nil }, Tokens: fixedToken("t"), Artifacts: arts,
				Stub: c.stub, StubSHA256: c.pin, Discovery: Discovery{Kernel: k.SHA256, Initrd: k.SHA256},
			})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			h.Register(mux)
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("GET", "/uki/"+c.mac+".efi", nil))
			if w.Code != 503 || !strings.Contains(w.Body.String(), c.want) {
				t.Errorf("%d %q, want 503 saying %q", w.Code, w.Body, c.want)
			}
		})
	}
}

// With the API on its own TLS listener the UKI names it and the CA to pin,
// as the script does.
func TestUKIAPIArgs(t *testing.T) {
	arts, _ := artifact.Open(t.TempDir())
	k, _ := arts.Put(context.Background(), strings.NewReader("kernel"))
	fp := "sha256:" + strings.Repeat("ab", 32)
	f := newFixture(t, "")
	h, err := New(Config{ServerURL: "http://10.77.0.1:8080", APIURL: "https://10.77.0.1:8443", CAFingerprint: fp,
		Machines: fakeMachines{}, Recipes: func(string) (*recipe.Recipe, error) { return nil, nil },
		Tokens: fixedToken("t"), Artifacts: arts, Stub: f.stub, Discovery: Discovery{Kernel: k.SHA256, Initrd: k.SHA256}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/uki/52-54-00-00-00-99.efi", nil))
	want := "ingot.server=http://10.77.0.1:8080 ingot.api=https://10.77.0.1:8443 ingot.ca=" + fp + " ingot.mode=discovery ingot.mac=52:54:00:00:00:99"
	if got := ukiSections(t, w.Body.Bytes())[".cmdline"]; w.Code != 200 || got != want {
		t.Errorf("%d, .cmdline %q, want %q", w.Code, got, want)
	}
}

// An arm64 agent kernel (its PE header says so) is put on the arm64 stub,
// an x86-64 one on the x86-64 stub: the recipe's kernel decides what the
// firmware gets. Without the arm64 stub, 503 naming its package.
func TestUKIStubFollowsKernel(t *testing.T) {
	ctx := context.Background()
	pe := func(machineType uint16, text string) []byte {
		b := ukitest.MinimalStub()
		binary.LittleEndian.PutUint16(b[0x44:], machineType)
		copy(b[0x400:], text)
		return b
	}
	dir := t.TempDir()
	stubX64, stubAA64 := filepath.Join(dir, "x64.stub"), filepath.Join(dir, "aa64.stub")
	os.WriteFile(stubX64, pe(0x8664, "x64 stub"), 0o644)
	os.WriteFile(stubAA64, pe(0xaa64, "aa64 stub"), 0o644)
	arts, _ := artifact.Open(t.TempDir())
	initrd, _ := arts.Put(ctx, strings.NewReader("initrd"))
	for name, c := range map[string]struct {
		kernel    []byte
		stubARM64 string
		code      int
		want      string // the stub's text in the UKI, or the refusal
	}{
		"x86-64 kernel":         {pe(0x8664, "bzImage"), stubAA64, 200, "x64 stub"},
		"arm64 kernel":          {pe(0xaa64, "Image"), stubAA64, 200, "aa64 stub"},
		"not a PE kernel":       {[]byte("fake kernel"), stubAA64, 200, "x64 stub"},
		"arm64, no arm64 stub":  {pe(0xaa64, "Image"), filepath.Join(dir, "missing"), 503, "systemd-boot-efi:arm64"},
		"x86-64, no arm64 stub": {pe(0x8664, "bzImage"), filepath.Join(dir, "missing"), 200, "x64 stub"},
	} {
		t.Run(name, func(t *testing.T) {
			k, _ := arts.Put(ctx, bytes.NewReader(c.kernel))
			rc := &recipe.Recipe{Name: "r", Version: "1"}
			rc.OS.Agent = recipe.AgentBoot{Kernel: recipe.Artifact{SHA256: k.SHA256}, Initrd: recipe.Artifact{SHA256: initrd.SHA256}}
			h, err := New(Config{ServerURL: "http://10.77.0.1:8080",
				Machines: fakeMachines{"52:54:00:00:00:02": {ID: "m-2", Name: "n2", Recipe: "r", State: machine.StateProvisioning}},
				Recipes:  func(string) (*recipe.Recipe, error) { return rc, nil }, Tokens: fixedToken("t"), Artifacts: arts,
				Stub: stubX64, StubARM64: c.stubARM64})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			h.Register(mux)
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("GET", "/uki/52-54-00-00-00-02.efi", nil))
			if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) {
				t.Fatalf("%d %.80q, want %d with %q", w.Code, w.Body, c.code, c.want)
			}
			if c.code == 200 && ukiSections(t, w.Body.Bytes())[".linux"] != string(c.kernel) {
				t.Error("the UKI's .linux is not the recipe's kernel")
			}
		})
	}
}
