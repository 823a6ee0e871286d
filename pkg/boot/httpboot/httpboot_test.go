package httpboot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/uki/ukitest"
)

type fakeMachines map[string]*machine.Machine

func (f fakeMachines) MachineByMAC(_ context.Context, mac string) (*machine.Machine, error) {
	if m, ok := f[mac]; ok {
		return m, nil
	}
	return nil, store.ErrNotFound
}

type fixedToken string

func (f fixedToken) IssueBootCredential(_ context.Context, m *machine.Machine, _ string, _ netip.Addr) (string, error) {
	return string(f) + "-" + m.ID, nil
}

type fixture struct {
	srv     *httptest.Server
	arts    *artifact.Store
	kernel  artifact.Ref
	initrd  artifact.Ref
	big     []byte
	bigRef  artifact.Ref
	reg     *prometheus.Registry
	bootDir string
	stub    string // the EFI stub agent UKIs are assembled on
}

// newFixture serves a Handler on a real loopback listener (httptest).
func newFixture(t *testing.T, unknown string, opts ...func(*Config)) *fixture {
	t.Helper()
	f, mux := newMux(t, unknown, opts...)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// newMux builds the fixture's Handler and its mux, not yet served.
func newMux(t testing.TB, unknown string, opts ...func(*Config)) (*fixture, *http.ServeMux) {
	t.Helper()
	ctx := context.Background()
	f := &fixture{reg: prometheus.NewRegistry(), bootDir: t.TempDir()}
	f.arts, _ = artifact.Open(t.TempDir())
	f.kernel, _ = f.arts.Put(ctx, strings.NewReader("fake kernel"))
	f.initrd, _ = f.arts.Put(ctx, strings.NewReader("fake initrd"))
	f.arts.SetName("agent-vmlinuz", f.kernel.SHA256)
	f.arts.SetName("agent-initrd", f.initrd.SHA256)
	f.big = bytes.Repeat([]byte("0123456789"), 100_000)
	f.bigRef, _ = f.arts.Put(ctx, bytes.NewReader(f.big))
	f.arts.SetName("big.img", f.bigRef.SHA256)
	os.WriteFile(filepath.Join(f.bootDir, "ipxe.efi"), []byte("ipxe efi binary"), 0o644)
	f.stub = filepath.Join(t.TempDir(), "linuxx64.efi.stub")
	os.WriteFile(f.stub, ukitest.MinimalStub(), 0o644)
	boot, _ := bootfiles.New([]string{f.bootDir}, nil)
	rc := &recipe.Recipe{Name: "gpu-h100", Version: "3"}
	rc.OS.Agent = recipe.AgentBoot{
		Kernel:  recipe.Artifact{SHA256: f.kernel.SHA256},
		Initrd:  recipe.Artifact{Path: "agent-initrd"},
		Cmdline: "console=ttyS0 panic=-1",
	}
	machines := fakeMachines{
		"52:54:00:00:00:01": {ID: "m-0001", Name: "node1", Recipe: "gpu-h100", State: machine.StateProvisioning},
		"52:54:00:00:00:02": {ID: "m-0002", Name: "node2", Recipe: "gpu-h100", State: machine.StateReady},
		"52:54:00:00:00:03": {ID: "m-0003", Name: "node3", Recipe: "gpu-h100", State: machine.StateReady, Arch: "uefi-x64"},
		"52:54:00:00:00:04": {ID: "m-0004", Name: "node4", Recipe: "missing", State: machine.StateReimaging},
		"52:54:00:00:00:05": {ID: "m-0005", Name: "node5", State: machine.StateDiscovered},
	}
	cfg := Config{
		ServerURL: "http://10.77.0.1:8080",
		Machines:  machines,
		Recipes: func(name string) (*recipe.Recipe, error) {
			if name == rc.Name {
				return rc, nil
			}
			return nil, fmt.Errorf("recipe %q: not found", name)
		},
		Tokens:     fixedToken("tok"),
		Artifacts:  f.arts,
		BootFiles:  boot,
		Unknown:    unknown,
		Discovery:  Discovery{Cmdline: "console=ttyS0"},
		Stub:       f.stub,
		Registerer: f.reg,
		Gatherer:   f.reg,
	}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	return f, mux
}

func (f *fixture) get(t *testing.T, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// golden compares got with testdata/NAME; UPDATE_TESTDATA=1 rewrites it.
func golden(t testing.TB, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_TESTDATA") != "" {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", p, diff)
	}
}

func TestScripts(t *testing.T) {
	tests := map[string]struct {
		unknown, query string
		code           int
	}{
		"known-bios":            {query: "mac=52:54:00:00:00:01&arch=bios", code: 200},
		"known-uefi":            {query: "mac=52-54-00-00-00-01&arch=uefi-x64", code: 200},
		"ready-bios":            {query: "mac=52:54:00:00:00:02&arch=bios", code: 200},
		"ready-uefi":            {query: "mac=52:54:00:00:00:02&arch=uefi-x64", code: 200},
		"ready-arch-from-store": {query: "mac=52:54:00:00:00:03", code: 200},
		"recipe-missing":        {query: "mac=52:54:00:00:00:04&arch=bios", code: 200},
		"discovery":             {query: "mac=52:54:00:00:00:99&arch=uefi-x64", code: 200},
		"discovered-machine":    {query: "mac=52:54:00:00:00:05&arch=bios", code: 200},
		"unknown-ignore":        {unknown: UnknownIgnore, query: "mac=52:54:00:00:00:99&arch=bios", code: 200},
		"bad-mac":               {query: "mac=nope", code: 400},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.unknown)
			resp, body := f.get(t, "/ipxe?"+tc.query, nil)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, body)
			}
			if tc.code != 200 {
				return
			}
			// Artifact hashes depend on fixture content: name them stably.
			got := strings.NewReplacer(f.kernel.SHA256, "KERNEL_SHA", f.initrd.SHA256, "INITRD_SHA").Replace(string(body))
			golden(t, name+".ipxe", []byte(got))
		})
	}
}

func TestDecide(t *testing.T) {
	want := map[machine.State]Action{
		machine.StateDiscovered: ActionDiscovery, machine.StateEnrolled: ActionLocal,
		machine.StateInspecting: ActionAgent, machine.StateProvisioning: ActionAgent,
		machine.StateVerifying: ActionLocal, machine.StateReady: ActionLocal,
		machine.StateFailed: ActionLocal, machine.StateReimaging: ActionAgent,
	}
	for _, s := range machine.States {
		if got := Decide(&machine.Machine{State: s}, UnknownDiscover); got != want[s] {
			t.Errorf("Decide(%s) = %s, want %s", s, got, want[s])
		}
	}
	if got := Decide(nil, UnknownIgnore); got != ActionExit {
		t.Errorf("Decide(unknown, ignore) = %s, want exit", got)
	}
}

func TestArtifactRangeETag(t *testing.T) {
	f := newFixture(t, "")
	sha := f.bigRef.SHA256
	etag := `"` + sha + `"`
	for _, path := range []string{"/artifacts/sha256/" + sha, "/artifacts/big.img"} {
		t.Run(path, func(t *testing.T) {
			resp, body := f.get(t, path, nil)
			if resp.StatusCode != 200 || !bytes.Equal(body, f.big) {
				t.Fatalf("full GET: status %d, %d bytes", resp.StatusCode, len(body))
			}
			if got := resp.Header.Get("ETag"); got != etag {
				t.Errorf("ETag %q, want %q", got, etag)
			}
			if got := resp.Header.Get("Content-Length"); got != fmt.Sprint(len(f.big)) {
				t.Errorf("Content-Length %q, want %d", got, len(f.big))
			}
			resp, body = f.get(t, path, map[string]string{"Range": "bytes=0-99"})
			if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, f.big[:100]) {
				t.Errorf("Range 0-99: status %d, body %q", resp.StatusCode, body)
			}
			if got, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes 0-99/%d", len(f.big)); got != want {
				t.Errorf("Content-Range %q, want %q", got, want)
			}
			resp, body = f.get(t, path, map[string]string{"Range": "bytes=999990-"})
			if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, f.big[999990:]) {
				t.Errorf("Range suffix: status %d, body %q", resp.StatusCode, body)
			}
			resp, _ = f.get(t, path, map[string]string{"If-None-Match": etag})
			if resp.StatusCode != http.StatusNotModified {
				t.Errorf("If-None-Match: status %d, want 304", resp.StatusCode)
			}
			resp, body = f.get(t, path, map[string]string{"Range": "bytes=0-9", "If-Range": `"other"`})
			if resp.StatusCode != 200 || len(body) != len(f.big) {
				t.Errorf("If-Range mismatch: status %d, %d bytes; want the whole file", resp.StatusCode, len(body))
			}
			many := strings.TrimSuffix(strings.Repeat("0-0,", 17), ",")
			for _, rng := range []struct {
				h    string
				code int
			}{{"bytes=-0", 416}, {"bytes=0-9,-0", 416}, {"bytes=" + many, 416}, {"bytes=" + many[4:], 206}} {
				resp, body = f.get(t, path, map[string]string{"Range": rng.h})
				if resp.StatusCode != rng.code || (rng.code == 416 && len(body) > 100) {
					t.Errorf("Range %.30s: status %d, %d bytes; want %d", rng.h, resp.StatusCode, len(body), rng.code)
				}
			}
			hresp, err := http.Head(f.srv.URL + path)
			if err != nil || hresp.StatusCode != 200 || hresp.ContentLength != int64(len(f.big)) {
				t.Errorf("HEAD: %v status %v length %v", err, hresp.StatusCode, hresp.ContentLength)
			}
		})
	}
	for _, path := range []string{"/artifacts/sha256/" + strings.Repeat("0", 64), "/artifacts/sha256/..%2f..%2fetc%2fpasswd", "/artifacts/nope"} {
		if resp, _ := f.get(t, path, nil); resp.StatusCode != 404 {
			t.Errorf("GET %s: status %d, want 404", path, resp.StatusCode)
		}
	}
}

func TestBootFilesMetricsHealth(t *testing.T) {
	f := newFixture(t, "")
	if resp, body := f.get(t, "/boot/ipxe.efi", nil); resp.StatusCode != 200 || string(body) != "ipxe efi binary" {
		t.Errorf("/boot/ipxe.efi: %d %q", resp.StatusCode, body)
	}
	if resp, _ := f.get(t, "/boot/..%2f..%2fetc%2fpasswd", nil); resp.StatusCode != 404 {
		t.Errorf("/boot traversal: status %d, want 404", resp.StatusCode)
	}
	if resp, body := f.get(t, "/healthz", nil); resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Errorf("/healthz: %d %q", resp.StatusCode, body)
	}
	f.get(t, "/artifacts/big.img", nil)
	_, body := f.get(t, "/metrics", nil)
	for _, want := range []string{
		`ingot_http_requests_total{code="200",route="artifact"} 1`,
		`ingot_http_requests_total{code="404",route="boot"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	mfs, _ := f.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "ingot_http_response_bytes_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "artifact" && m.GetCounter().GetValue() != float64(len(f.big)) {
					t.Errorf("artifact bytes counted %v, want %d (sendfile path must count)", m.GetCounter().GetValue(), len(f.big))
				}
			}
		}
	}
}

// Only 6-byte MACs: /ipxe?mac= with an EUI-64 or an IPoIB address is 400
// naming the length (before, the 8-byte MAC was taken as an unknown
// machine and got the discovery script), /uki/ with one is 404.
func TestOnlyEthernetMACs(t *testing.T) {
	f := newFixture(t, UnknownDiscover)
	for _, mac := range []string{"00:00:00:00:fe:80:00:00", "80:00:02:08:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:6b:2c:91", "52:54:00:00:00"} {
		resp, body := f.get(t, "/ipxe?mac="+mac, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "expected six hex bytes") {
			t.Errorf("/ipxe?mac=%s: %d %q, want 400 naming six bytes", mac, resp.StatusCode, body)
		}
		resp, _ = f.get(t, "/uki/"+strings.ReplaceAll(mac, ":", "-")+".efi", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("/uki/ with %s: %d, want 404", mac, resp.StatusCode)
		}
	}
	if resp, _ := f.get(t, "/ipxe?mac=52-54-00-00-00-01", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/ipxe with a 6-byte MAC in dashes: %d", resp.StatusCode)
	}
}
