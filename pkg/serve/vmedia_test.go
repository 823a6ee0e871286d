package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/iso"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// jobStates is a JobLookup over a map of job ID -> state.
type jobStates struct {
	mu sync.Mutex
	m  map[string]store.JobState
}

func (j *jobStates) GetJob(_ context.Context, id string) (*store.Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	st, ok := j.m[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return &store.Job{ID: id, State: st}, nil
}

func (j *jobStates) set(id string, st store.JobState) { j.mu.Lock(); j.m[id] = st; j.mu.Unlock() }

type mediaFixture struct {
	v    *VirtualMedia
	jobs *jobStates
	dir  string
	srv  *httptest.Server
	m    *machine.Machine
	r    *recipe.Recipe
}

func newMediaFixture(t *testing.T) *mediaFixture {
	t.Helper()
	return newLimitedMediaFixture(t, nil)
}

// newLimitedMediaFixture serves the CDs behind the public rate limit l.
func newLimitedMediaFixture(t *testing.T, l *ratelimit.Limiter) *mediaFixture {
	t.Helper()
	netnstest.NeedNoError(t, "virtual media CDs", iso.Check())
	dir := t.TempDir()
	arts, err := artifact.Open(filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ref, err := arts.PutFile(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return ref.SHA256
	}
	ksha := put("vmlinuz", bytes.Repeat([]byte("kernel "), 30000))
	isha := put("initrd", bytes.Repeat([]byte("initrd "), 30000))
	f := &mediaFixture{jobs: &jobStates{m: map[string]store.JobState{}}, dir: filepath.Join(dir, "vmedia"),
		m: &machine.Machine{ID: "m-1", Name: "node1", MACs: []string{"52:54:00:77:00:10"}},
		r: &recipe.Recipe{Name: "lab-vmedia", OS: recipe.OS{Agent: recipe.AgentBoot{Boot: recipe.AgentBootVirtualMedia,
			Kernel: recipe.Artifact{SHA256: ksha}, Initrd: recipe.Artifact{SHA256: isha}, Cmdline: "console=ttyS0,115200"}}}}
	if f.v, err = NewVirtualMedia(MediaConfig{Dir: f.dir, Artifacts: arts, Jobs: f.jobs}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	f.v.Register(mux, l)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *mediaFixture) get(t *testing.T, url string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// isolinuxCfg reads the isolinux.cfg of a CD.
func isolinuxCfg(t *testing.T, cd []byte) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "cd.iso")
	if err := os.WriteFile(p, cd, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", p, "-extract", "/isolinux/isolinux.cfg", filepath.Join(dir, "cfg")).CombinedOutput(); err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cfg"))
	return string(b)
}

// A job's boot CD: built once per job and contents, served at an
// unguessable URL on the boot listener, whole and by range, booting the
// agent with the server's URLs, the CA it pins and the machine's MAC, never
// a credential; gone when its job ends.
func TestVirtualMediaCD(t *testing.T) {
	ctx := context.Background()
	f := newMediaFixture(t)
	if _, err := f.v.AgentMedia(ctx, f.m, f.r, "j1"); err == nil || !strings.Contains(err.Error(), "not up yet") {
		t.Fatalf("before bind: %v, want the listener is not up", err)
	}
	f.v.bind(f.srv.URL+"/", "https://10.77.0.1:8443", "sha256:"+strings.Repeat("ab", 32))
	f.jobs.set("j1", store.JobRunning)
	url, err := f.v.AgentMedia(ctx, f.m, f.r, "j1")
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := strings.CutPrefix(url, f.srv.URL+"/vmedia/")
	if !ok || !tokenRE.MatchString(strings.TrimSuffix(tok, "/"+cdFile)) || !strings.HasSuffix(tok, "/"+cdFile) {
		t.Fatalf("URL %s: want %s/vmedia/<48 hex>/%s", url, f.srv.URL, cdFile)
	}
	if again, err := f.v.AgentMedia(ctx, f.m, f.r, "j1"); err != nil || again != url {
		t.Errorf("asked again for the same job: %s (%v), want %s", again, err, url)
	}
	if n, _ := filepath.Glob(filepath.Join(f.dir, "*.iso")); len(n) != 1 {
		t.Errorf("%d CDs on disk, want 1", len(n))
	}

	code, cd := f.get(t, url)
	if code != 200 || len(cd) < 32<<10 {
		t.Fatalf("GET the CD: %d, %d bytes", code, len(cd))
	}
	cfg := isolinuxCfg(t, cd)
	for _, want := range []string{"ingot.server=" + f.srv.URL + " ", "ingot.api=https://10.77.0.1:8443 ", "ingot.ca=sha256:abab",
		"ingot.mac=52:54:00:77:00:10 ", "ingot.machine=m-1 ", "console=ttyS0,115200", "SAY ingot: booting the agent of job j1 for node1"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("isolinux.cfg lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, "ingot.token") {
		t.Errorf("the CD carries a credential:\n%s", cfg)
	}
	if code, part := f.get(t, url, "Range", "bytes=32768-32773"); code != http.StatusPartialContent || !bytes.Equal(part, cd[32768:32774]) {
		t.Errorf("Range: %d %q, want 206 and the CD's bytes", code, part)
	}
	if code, _ := f.get(t, url, "Range", "bytes=0-1,4-5"); code != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("two ranges: %d, want 416", code)
	}
	for _, bad := range []string{strings.Replace(url, cdFile, "other.iso", 1), f.srv.URL + "/vmedia/" + strings.Repeat("0", 48) + "/" + cdFile,
		f.srv.URL + "/vmedia/../" + cdFile} {
		if code, _ := f.get(t, bad); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", bad, code)
		}
	}

	// Another recipe version for the same job replaces its CD.
	f.r.OS.Agent.Cmdline = "console=ttyS1"
	url2, err := f.v.AgentMedia(ctx, f.m, f.r, "j1")
	if err != nil || url2 == url {
		t.Fatalf("changed contents: %s (%v), want a new URL", url2, err)
	}
	if code, _ := f.get(t, url); code != http.StatusNotFound {
		t.Errorf("the replaced CD still answers %d", code)
	}

	f.jobs.set("j1", store.JobSucceeded)
	if code, _ := f.get(t, url2); code != http.StatusNotFound {
		t.Errorf("the CD of an ended job answers %d, want 404", code)
	}
	if n, _ := filepath.Glob(filepath.Join(f.dir, "*")); len(n) != 0 {
		t.Errorf("files left after the job ended: %v", n)
	}
}

// Building a CD for one job deletes those of jobs that ended; running
// jobs keep theirs.
func TestVirtualMediaSweep(t *testing.T) {
	ctx := context.Background()
	f := newMediaFixture(t)
	f.v.bind(f.srv.URL, "", "")
	for _, j := range []string{"old", "live"} {
		f.jobs.set(j, store.JobRunning)
		if _, err := f.v.AgentMedia(ctx, f.m, f.r, j); err != nil {
			t.Fatal(err)
		}
	}
	f.jobs.set("old", store.JobFailed)
	f.jobs.set("new", store.JobRunning)
	url, err := f.v.AgentMedia(ctx, f.m, f.r, "new")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	metas, _ := filepath.Glob(filepath.Join(f.dir, "*.json"))
	for _, p := range metas {
		m, _ := f.v.meta(strings.TrimSuffix(filepath.Base(p), ".json"))
		jobs = append(jobs, m.Job)
	}
	if strings.Join(jobs, ",") != "live,new" && strings.Join(jobs, ",") != "new,live" {
		t.Errorf("CDs kept for jobs %v, want live and new", jobs)
	}
	// No TLS API: the agent is told only ingot.server.
	_, cd := f.get(t, url)
	if cfg := isolinuxCfg(t, cd); strings.Contains(cfg, "ingot.api=") || strings.Contains(cfg, "ingot.ca=") {
		t.Errorf("no API listener, yet:\n%s", cfg)
	}
}

func TestVirtualMediaRefuses(t *testing.T) {
	ctx := context.Background()
	f := newMediaFixture(t)
	f.v.bind(f.srv.URL, "", "")
	f.jobs.set("j", store.JobRunning)
	for name, tc := range map[string]struct {
		change func(m *machine.Machine, r *recipe.Recipe)
		want   string
	}{
		"kernel by URL": {func(_ *machine.Machine, r *recipe.Recipe) {
			r.OS.Agent.Kernel = recipe.Artifact{Path: "http://x/vmlinuz"}
		}, "not a URL"},
		"initrd not there": {func(_ *machine.Machine, r *recipe.Recipe) { r.OS.Agent.Initrd.SHA256 = strings.Repeat("1", 64) }, "not in the artifact store"},
		"no MAC":           {func(m *machine.Machine, _ *recipe.Recipe) { m.MACs = nil }, "has no MAC"},
	} {
		t.Run(name, func(t *testing.T) {
			m, r := *f.m, *f.r
			tc.change(&m, &r)
			_, err := f.v.AgentMedia(ctx, &m, &r, "j")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := NewVirtualMedia(MediaConfig{Dir: t.TempDir()}); err == nil {
		t.Error("built without artifacts and jobs")
	}
}

// /vmedia/ is public: unknown CD URLs and the first request of a CD's URL
// count against the client's address (a burst of 3 here, then 429), while
// a BMC reading a CD it has started, by many small ranges, is never
// throttled.
func TestVirtualMediaRateLimit(t *testing.T) {
	ctx := context.Background()
	f := newLimitedMediaFixture(t, ratelimit.New(0.001, 3, 0, nil))
	f.v.bind(f.srv.URL+"/", "", "")
	f.jobs.set("j1", store.JobRunning)
	url, err := f.v.AgentMedia(ctx, f.m, f.r, "j1")
	if err != nil {
		t.Fatal(err)
	}
	guess := f.srv.URL + "/vmedia/" + strings.Repeat("0", 48) + "/" + cdFile
	for i := range 2 {
		if code, _ := f.get(t, guess); code != http.StatusNotFound {
			t.Fatalf("guess %d: %d, want 404 within the burst", i, code)
		}
	}
	if code, _ := f.get(t, url, "Range", "bytes=0-2047"); code != http.StatusPartialContent {
		t.Fatalf("the CD's first request, the burst's last: %d, want 206", code)
	}
	for i := range 50 {
		if code, _ := f.get(t, url, "Range", fmt.Sprintf("bytes=%d-%d", 2048*i, 2048*i+2047)); code != http.StatusPartialContent {
			t.Fatalf("the BMC's read %d with the bucket empty: %d, want 206 (not throttled)", i, code)
		}
	}
	if code, _ := f.get(t, guess); code != http.StatusTooManyRequests {
		t.Errorf("a guessed CD URL with the bucket empty: %d, want 429", code)
	}
}
