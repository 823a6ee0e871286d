package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The test binary doubles as the agent binary: with INGOT_AGENT_MAIN=1 it
// runs main() with the arguments after "--".
func TestMain(m *testing.M) {
	if os.Getenv("INGOT_AGENT_MAIN") == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"ingot-agent"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		return
	}
	os.Exit(m.Run())
}

// fakeServer is an edge mock of ingot's agent API (the real one is the
// engine's), recording what the agent posts.
type fakeServer struct {
	*httptest.Server
	token string
	task  api.Task
	then  []api.Task // tasks for later GETs, in order (the last repeats)
	image []byte

	mu        sync.Mutex
	inventory *machine.Inventory
	progress  []api.Progress
	checks    []api.CheckResult
	logLines  []string
	done      []api.Done
}

func newFakeServer(t *testing.T, task api.Task, image []byte) *fakeServer {
	return newFakeServerOn(t, nil, task, image)
}

// newFakeServerOn serves on ln (nil: a loopback port).
func newFakeServerOn(t *testing.T, ln net.Listener, task api.Task, image []byte) *fakeServer {
	f := &fakeServer{token: "agent-1", task: task, image: image}
	mux := http.NewServeMux()
	// Without a script the agent asks for the boot credential by MAC.
	mux.HandleFunc("POST "+api.PathCredential, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("mac") != "52:54:00:12:34:56" || r.Header.Get("Authorization") != "" {
			http.Error(w, "not tied", http.StatusForbidden)
			return
		}
		json.NewEncoder(w).Encode(api.Exchange{Token: "tok-1", MachineID: task.MachineID})
	})
	// The boot credential of the script (tok-1) opens only the exchange.
	mux.HandleFunc("POST "+api.PathExchange, func(w http.ResponseWriter, r *http.Request) {
		if tok, _ := api.BearerToken(r); tok != "tok-1" {
			http.Error(w, "bad boot credential", http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(api.Exchange{Token: f.token, MachineID: task.MachineID})
	})
	auth := func(h func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if tok, ok := api.BearerToken(r); !ok || tok != f.token {
				http.Error(w, "bad token", http.StatusUnauthorized)
				return
			}
			body, _ := io.ReadAll(r.Body)
			f.mu.Lock()
			defer f.mu.Unlock()
			h(w, r, body)
		}
	}
	decode := func(w http.ResponseWriter, b []byte, v any) bool {
		if err := json.Unmarshal(b, v); err != nil {
			t.Errorf("agent posted bad JSON %s: %v", b, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	mux.HandleFunc("GET "+api.PathTask, auth(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		json.NewEncoder(w).Encode(f.task)
		if len(f.then) > 0 {
			f.task, f.then = f.then[0], f.then[1:]
		}
	}))
	mux.HandleFunc("POST "+api.PathInventory, auth(func(w http.ResponseWriter, _ *http.Request, b []byte) {
		var inv machine.Inventory
		if decode(w, b, &inv) {
			f.inventory = &inv
		}
	}))
	mux.HandleFunc("POST "+api.PathProgress, auth(func(w http.ResponseWriter, _ *http.Request, b []byte) {
		var p api.Progress
		if decode(w, b, &p) {
			f.progress = append(f.progress, p)
		}
	}))
	// As the engine does (without waivers): a failed check that was not
	// skipped fails acceptance and the results are refused with 409.
	mux.HandleFunc("POST "+api.PathChecks, auth(func(w http.ResponseWriter, _ *http.Request, b []byte) {
		if err := json.Unmarshal(b, &f.checks); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, c := range f.checks {
			if !c.OK && !c.Skipped {
				http.Error(w, "acceptance checks failed: "+c.Name+": "+c.Detail, http.StatusConflict)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("POST "+api.PathLog, auth(func(w http.ResponseWriter, _ *http.Request, b []byte) {
		var l api.Log
		if decode(w, b, &l) {
			f.logLines = append(f.logLines, l.Lines...)
		}
	}))
	mux.HandleFunc("POST "+api.PathDone, auth(func(w http.ResponseWriter, _ *http.Request, b []byte) {
		var d api.Done
		if decode(w, b, &d) {
			f.done = append(f.done, d)
		}
	}))
	mux.HandleFunc("GET /images/lab.raw.zst", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "lab.raw.zst", time.Unix(0, 0), bytes.NewReader(f.image))
	})
	f.Server = httptest.NewUnstartedServer(mux)
	if ln != nil {
		f.Server.Listener.Close()
		f.Server.Listener = ln
	}
	f.Server.Start()
	t.Cleanup(f.Close)
	return f
}

// runAgent runs the agent binary (this test binary) and returns its exit
// code and console output.
func runAgent(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "INGOT_AGENT_MAIN=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running the agent: %v\n%s", err, out)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

func labImage(t *testing.T) (raw, zst []byte, sum string) {
	raw = make([]byte, 24<<20+4096)
	rng := rand.New(rand.NewPCG(3, 4))
	for off := 0; off < len(raw); off += 1 << 20 {
		if (off>>20)%3 == 1 {
			for i := off; i < min(off+512<<10, len(raw)); i++ {
				raw[i] = byte(rng.Uint32() % 7)
			}
		}
	}
	enc, _ := zstd.NewWriter(nil)
	zst = enc.EncodeAll(raw, nil)
	s := sha256.Sum256(zst)
	return raw, zst, hex.EncodeToString(s[:])
}

func provisionTask(sum string, size int) api.Task {
	return api.Task{
		MachineID: "m-1", Recipe: "lab-qemu", RecipeVersion: "3", Mode: api.ModeProvision,
		Image:    api.Image{URL: "/images/lab.raw.zst", SHA256: sum, Format: api.FormatRawZstd, Size: int64(size)},
		Checks:   []recipe.Check{{Name: "gpu-count"}, {Name: "pcie-link"}, {Name: "gpu-burn"}},
		Expected: recipe.Hardware{GPUs: []recipe.GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 2}}},
		Handoff:  api.HandoffReboot,
	}
}

// fakeRoot is the inventory package's fake GPU node: two H100s, the second
// on a degraded x8 link.
const fakeRoot = "../../pkg/agent/inventory/testdata/gpu-node"

func TestAgentProvisionsToFile(t *testing.T) {
	raw, zst, sum := labImage(t)
	task := provisionTask(sum, len(zst))
	task.Checks = task.Checks[:1] // gpu-count passes; pcie-link would fail on the degraded GPU
	srv := newFakeServer(t, task, zst)
	disk := filepath.Join(t.TempDir(), "disk.img")
	code, out := runAgent(t, "--cmdline", "/dev/null", "--server", srv.URL, "--token", "tok-1", "--machine", "m-1",
		"--root", fakeRoot, "--disk", disk)
	if code != 0 {
		t.Fatalf("exit code %d:\n%s", code, out)
	}
	for _, marker := range []string{
		"ingot-agent: task mode=provision recipe=lab-qemu",
		"ingot-agent: inventory posted cpus=2 gpus=2",
		"ingot-agent: image written sha256=" + sum + " bytes=" + itoa(len(raw)),
		"ingot-agent: check gpu-count ok value=2",
		"ingot-agent: done handoff=reboot",
		"ingot-agent: handoff reboot (not performed",
	} {
		if !strings.Contains(out, marker) {
			t.Errorf("console lacks %q:\n%s", marker, out)
		}
	}
	got, err := os.ReadFile(disk)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("disk differs from the image (err %v, len %d vs %d)", err, len(got), len(raw))
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.inventory == nil || srv.inventory.Source != "agent" || len(srv.inventory.GPUs) != 2 {
		t.Errorf("inventory posted: %+v", srv.inventory)
	}
	if len(srv.progress) == 0 || srv.progress[len(srv.progress)-1].Bytes != int64(len(zst)) {
		t.Errorf("progress posted: %+v, want the last at %d bytes", srv.progress, len(zst))
	}
	if len(srv.checks) != 1 || !srv.checks[0].OK {
		t.Errorf("checks posted: %+v", srv.checks)
	}
	if len(srv.done) != 1 || !srv.done[0].OK || srv.done[0].ImageSHA256 != sum || srv.done[0].Disk != disk || srv.done[0].ImageBytes != int64(len(raw)) {
		t.Errorf("done posted: %+v", srv.done)
	}
	if len(srv.logLines) == 0 {
		t.Errorf("no log lines posted")
	}
}

func TestAgentImageMismatchFails(t *testing.T) {
	_, zst, _ := labImage(t)
	wrong := strings.Repeat("ab", 32)
	srv := newFakeServer(t, provisionTask(wrong, len(zst)), zst)
	disk := filepath.Join(t.TempDir(), "disk.img")
	code, out := runAgent(t, "--cmdline", "/dev/null", "--server", srv.URL, "--token", "tok-1", "--root", fakeRoot, "--disk", disk)
	if code == 0 {
		t.Fatalf("exit code 0 after a sha256 mismatch:\n%s", out)
	}
	if strings.Contains(out, "image written") || strings.Contains(out, "done handoff") || !strings.Contains(out, "sha256 MISMATCH expected="+wrong) {
		t.Errorf("console:\n%s", out)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.done) != 1 || srv.done[0].OK || srv.done[0].Step != api.StepImage || !strings.Contains(srv.done[0].Reason, "sha256 mismatch") {
		t.Errorf("done posted: %+v, want one with ok=false, step image, reason sha256 mismatch", srv.done)
	}
	if srv.checks != nil {
		t.Errorf("checks ran after a failed image: %+v", srv.checks)
	}
}

func TestAgentCheckFailureFails(t *testing.T) {
	raw, zst, sum := labImage(t)
	_ = raw
	srv := newFakeServer(t, provisionTask(sum, len(zst)), zst) // pcie-link fails on the x8 GPU
	code, out := runAgent(t, "--cmdline", "/dev/null", "--server", srv.URL, "--token", "tok-1", "--root", fakeRoot,
		"--disk", filepath.Join(t.TempDir(), "d"))
	if code == 0 || !strings.Contains(out, "check pcie-link FAILED") || !strings.Contains(out, "check gpu-burn skipped") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.done) != 1 || srv.done[0].OK || srv.done[0].Step != api.StepChecks || !strings.Contains(srv.done[0].Reason, "pcie-link") {
		t.Errorf("done posted: %+v", srv.done)
	}
}

func TestAgentDiscoverAndCmdline(t *testing.T) {
	srv := newFakeServer(t, api.Task{MachineID: "m-2", Mode: api.ModeDiscover}, nil)
	cmdline := filepath.Join(t.TempDir(), "cmdline")
	os.WriteFile(cmdline, []byte("console=ttyS0 ingot.server="+srv.URL+" ingot.token=tok-1 ingot.machine=m-2\n"), 0o644)
	code, out := runAgent(t, "--cmdline", cmdline, "--root", fakeRoot)
	if code != 0 || !strings.Contains(out, "starting machine=m-2") || !strings.Contains(out, "handoff poweroff (not performed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.inventory == nil || len(srv.done) != 1 || !srv.done[0].OK || srv.done[0].Handoff != api.HandoffPoweroff {
		t.Errorf("inventory %v, done %+v", srv.inventory != nil, srv.done)
	}
}

func TestAgentBadToken(t *testing.T) {
	srv := newFakeServer(t, api.Task{Mode: api.ModeDiscover}, nil)
	code, out := runAgent(t, "--cmdline", "/dev/null", "--server", srv.URL, "--token", "stolen", "--root", fakeRoot)
	if code == 0 || !strings.Contains(out, "FAILED step=task") || !strings.Contains(out, "401") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestAgentMissingServer(t *testing.T) {
	code, out := runAgent(t, "--cmdline", "/dev/null")
	if code == 0 || !strings.Contains(out, "ingot.server is missing") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestAgentFirstboot(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, _ := api.BearerToken(r); tok != "mf_secret" || r.URL.Path != api.PathFirstboot {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc/sys/kernel"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/sys/kernel/osrelease"), []byte("6.1.0-40-amd64\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "sys/module/nvidia"), 0o755)
	os.WriteFile(filepath.Join(root, "sys/module/nvidia/version"), []byte("535.309.01\n"), 0o644)
	env := filepath.Join(t.TempDir(), "firstboot.env")
	os.WriteFile(env, []byte("INGOT_SERVER="+srv.URL+"\nINGOT_FIRSTBOOT=mf_secret\n"), 0o600)
	code, out := runAgent(t, "firstboot", "--cmdline", "/dev/null", "--env", env, "--root", root)
	if code != 0 || !strings.Contains(out, "firstboot reported kernel=6.1.0-40-amd64") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var sw machine.Software
	if err := json.Unmarshal(got, &sw); err != nil || sw.Drivers["nvidia"] != "535.309.01" {
		t.Errorf("posted %s (%v)", got, err)
	}
	if _, err := os.Stat(env); !os.IsNotExist(err) {
		t.Errorf("the first-boot secret file is still there after the report (%v): it must be deleted after use", err)
	}
}

// With a burn-in plan the report carries a result for every burn-in check:
// a tool the installed system lacks could not run (skipped, naming it, with
// its evidence for the server's judge), which the engine fails unless the
// recipe marks it optional.
func TestAgentFirstbootRunsBurnIn(t *testing.T) {
	var got api.FirstBoot
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc/sys/kernel"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/sys/kernel/osrelease"), []byte("6.1.0-40-amd64\n"), 0o644)
	plan := filepath.Join(t.TempDir(), "burn-in.json")
	os.WriteFile(plan, []byte(`{"checks":[{"name":"dcgm-diag"},{"name":"gpu-burn","min":"45000Gflop/s"}],"burn_in":{"duration":"1s"},"gpus":8}`), 0o644)
	t.Setenv("PATH", t.TempDir()) // the installed system has none of the tools
	code, out := runAgent(t, "firstboot", "--cmdline", "/dev/null", "--env", "/dev/null", "--server", srv.URL, "--secret", "mf_s",
		"--root", root, "--plan", plan)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if len(got.BurnIn) != 2 || !got.BurnIn[0].Skipped || got.BurnIn[0].Detail != "dcgmi: not found in the installed system" ||
		!got.BurnIn[1].Skipped || !strings.Contains(got.BurnIn[1].Detail, "gpu_burn: not found") ||
		got.BurnIn[1].Verdict != api.VerdictCouldNotRun || got.BurnIn[1].Evidence == nil || got.BurnIn[1].Evidence.NotRun == "" {
		t.Errorf("burn-in reported %+v", got.BurnIn)
	}
	if _, err := os.Stat(plan); !os.IsNotExist(err) {
		t.Errorf("the burn-in plan is still there after the report (%v)", err)
	}
}

// UEFI HTTP boot or virtual media: no script carried a credential; the
// agent asks for it by MAC, exchanges it and provisions.
func TestAgentAsksForCredential(t *testing.T) {
	_, zst, sum := labImage(t)
	task := provisionTask(sum, len(zst))
	task.Checks = task.Checks[:1]
	srv := newFakeServer(t, task, zst)
	cmdline := filepath.Join(t.TempDir(), "cmdline")
	os.WriteFile(cmdline, []byte("console=ttyS0 ingot.server="+srv.URL+" ingot.mac=52:54:00:12:34:56\n"), 0o644)
	code, out := runAgent(t, "--cmdline", cmdline, "--root", fakeRoot, "--disk", filepath.Join(t.TempDir(), "disk.img"))
	if code != 0 || !strings.Contains(out, "ingot-agent: done handoff=reboot") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// Without the secret the agent wrote, there is nothing to report with.
func TestAgentFirstbootWithoutSecret(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc/sys/kernel"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/sys/kernel/osrelease"), []byte("6.1.0-40-amd64\n"), 0o644)
	code, out := runAgent(t, "firstboot", "--cmdline", "/dev/null", "--env", "/dev/null", "--server", "http://127.0.0.1:1", "--root", root)
	if code == 0 || !strings.Contains(out, "no first-boot secret") {
		t.Fatalf("exit %d, want a failure naming the missing secret:\n%s", code, out)
	}
}

// The agent writes the job's first-boot secret into the installed system.
func TestAgentInstallsFirstBootSecret(t *testing.T) {
	_, zst, sum := labImage(t)
	task := provisionTask(sum, len(zst))
	task.Checks, task.FirstBootSecret = task.Checks[:1], "mf_job_secret"
	srv := newFakeServer(t, task, zst)
	install := t.TempDir()
	code, out := runAgent(t, "--cmdline", "/dev/null", "--server", srv.URL, "--token", "tok-1", "--machine", "m-1",
		"--root", fakeRoot, "--disk", filepath.Join(t.TempDir(), "disk.img"), "--install-root", install)
	if code != 0 {
		t.Fatalf("exit code %d:\n%s", code, out)
	}
	p := filepath.Join(install, api.FirstBootEnv)
	b, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), "INGOT_FIRSTBOOT=mf_job_secret\n") || !strings.Contains(string(b), "INGOT_SERVER="+srv.URL) {
		t.Fatalf("%s: %q, %v", p, b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
	}
}

func TestAgentDiscoveryWithoutToken(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	code, out := runAgent(t, "--cmdline", "/dev/null", "--server", srv.URL, "--root", fakeRoot)
	if code == 0 {
		t.Fatalf("no token and no discovery mode: exit 0:\n%s", out)
	}
	cmdline := filepath.Join(t.TempDir(), "cmdline")
	os.WriteFile(cmdline, []byte("ingot.server="+srv.URL+" ingot.mode=discovery ingot.mac=52:54:00:aa:bb:cc"), 0o644)
	code, out = runAgent(t, "--cmdline", cmdline, "--root", fakeRoot)
	if code != 0 || !strings.Contains(out, "handoff poweroff (not performed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "POST " + api.PathInventory + "?mac=52%3A54%3A00%3Aaa%3Abb%3Acc"
	if len(got) == 0 || got[0] != want {
		t.Errorf("requests %v, want the first %q (no task GET without a token)", got, want)
	}
}

// A discover task from a server with no job for the machine: done is
// refused (409, as the engine answers), the agent still powers off.
func TestAgentDiscoverDoneRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case api.PathExchange:
			json.NewEncoder(w).Encode(api.Exchange{Token: "a", MachineID: "m-3"})
		case api.PathTask:
			json.NewEncoder(w).Encode(api.Task{MachineID: "m-3", Mode: api.ModeDiscover})
		case api.PathDone:
			http.Error(w, "done from m-3: no running job", http.StatusConflict)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	code, out := runAgent(t, "--cmdline", "/dev/null", "--server", srv.URL, "--token", "t", "--root", fakeRoot)
	if code != 0 || !strings.Contains(out, "discovery finished anyway") || !strings.Contains(out, "handoff poweroff") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
