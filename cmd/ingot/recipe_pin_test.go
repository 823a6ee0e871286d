package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// pinFixture copies recipes/ into a temp folder and makes a content store
// holding the GPU image and the agent kernel and initrd under the names
// the recipes use. It returns the folder, the store and the digests.
func pinFixture(t *testing.T) (dir, store string, sums map[string]string) {
	t.Helper()
	root := recipeRoot(t)
	dir = filepath.Join(t.TempDir(), "recipes")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "recipes"))); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base-gpu.yaml")
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base, unpinned(t, b), 0o644); err != nil {
		t.Fatal(err)
	}
	store = filepath.Join(t.TempDir(), "artifacts")
	st, err := artifact.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	sums = map[string]string{}
	for _, name := range []string{"debian-12-nvidia-cuda.raw.zst", "agent-vmlinuz", "agent-initrd"} {
		ref, err := st.Put(context.Background(), bytes.NewReader([]byte("content of "+name)))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetName(name, ref.SHA256); err != nil {
			t.Fatal(err)
		}
		sums[name] = ref.SHA256
	}
	return dir, store, sums
}

// unpinned is a shipped recipe with its sha256 pins set back to the
// placeholder: the recipe as a site that pins its own builds starts from
// (base-gpu ships pinned to the agent this repository built).
func unpinned(t *testing.T, b []byte) []byte {
	t.Helper()
	out := regexp.MustCompile(`sha256: "[0-9a-f]{64}"`).ReplaceAll(b, []byte(`sha256: "`+strings.Repeat("0", 64)+`"`))
	if bytes.Equal(out, b) {
		t.Fatal("no sha256 pin to set back; update this test")
	}
	return out
}

func TestRecipePin(t *testing.T) {
	dir, store, sums := pinFixture(t)
	zero := strings.Repeat("0", 64)
	train := filepath.Join(dir, "gpu-train-h100x8.yaml")
	before, _ := os.ReadFile(train)
	// Not a template any more: lint now wants every pin, its own and the base's.
	untemplated := strings.Replace(string(before), "template: true                          # not assignable until os.image.sha256 is pinned (ingot recipe pin)\n", "", 1)
	if untemplated == string(before) {
		t.Fatal("the fixture's template line moved; update this test")
	}
	if err := os.WriteFile(train, []byte(untemplated), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(train, 0o640); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(recipeRoot(t), "testdata/recipes/images")

	out, _, err := runIngot(t, "recipe", "pin", "--store", store, "--images", images, train)
	wantExit(t, err, 1) // the inherited agent pins are still placeholders
	for _, want := range []string{
		train + ":71: pinned os.image.sha256 = " + sums["debian-12-nvidia-cuda.raw.zst"] + " (debian-12-nvidia-cuda.raw.zst in " + store + ")",
		train + ": os.agent.kernel.sha256 is the placeholder it inherits: pin " + filepath.Join(dir, "base-gpu.yaml"),
		"error: extends: os.agent.kernel.sha256 inherited from base-gpu",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pin output lacks %q:\n%s", want, out)
		}
	}
	after, _ := os.ReadFile(train)
	if want := strings.Replace(untemplated, zero, sums["debian-12-nvidia-cuda.raw.zst"], 1); string(after) != want {
		t.Errorf("pin changed more than the image pin:\n%s", after)
	}
	if st, _ := os.Stat(train); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the file's own 0640", st.Mode().Perm())
	}

	out, _, err = runIngot(t, "recipe", "pin", "--store", store, "--images", images, filepath.Join(dir, "base-gpu.yaml"))
	wantExit(t, err, 0)
	for _, want := range []string{"pinned os.agent.kernel.sha256 = " + sums["agent-vmlinuz"], "pinned os.agent.initrd.sha256 = " + sums["agent-initrd"],
		"still template: true"} {
		if !strings.Contains(out, want) {
			t.Errorf("base pin output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runIngot(t, "recipe", "pin", "--store", store, "--images", images, train)
	wantExit(t, err, 0)
	if !strings.Contains(out, "no placeholder or missing pin in this file") || strings.Contains(out, "error") {
		t.Errorf("second pin: %s", out)
	}
	set, diags := recipe.Options{ImagesDir: images}.Load(dir)
	if recipe.HasErrors(diags) {
		t.Errorf("pinned recipes do not lint:\n%v", diags)
	}
	if r, _ := set.Get("gpu-train-h100x8"); r.IsTemplate() || r.OS.Agent.Kernel.SHA256 != sums["agent-vmlinuz"] {
		t.Errorf("pinned recipe: template %v, kernel %s", r.IsTemplate(), r.OS.Agent.Kernel.SHA256)
	}
}

func TestRecipePinErrors(t *testing.T) {
	dir, store, _ := pinFixture(t)
	infer := filepath.Join(dir, "gpu-infer-l40sx4.yaml")
	before, _ := os.ReadFile(infer)
	empty := filepath.Join(t.TempDir(), "empty")
	if _, err := artifact.Open(empty); err != nil {
		t.Fatal(err)
	}
	_, _, err := runIngot(t, "recipe", "pin", "--store", empty, infer)
	if err == nil || !strings.Contains(err.Error(), "nothing written") ||
		!strings.Contains(err.Error(), "os.image.sha256: debian-12-nvidia-cuda.raw.zst or debian-12-nvidia-cuda not in the content store "+empty) {
		t.Errorf("empty store: %v", err)
	}
	if after, _ := os.ReadFile(infer); !bytes.Equal(before, after) {
		t.Error("a failed pin changed the file")
	}
	_, _, err = runIngot(t, "recipe", "pin", "--store", filepath.Join(t.TempDir(), "none"), infer)
	if err == nil || !strings.Contains(err.Error(), "expected a folder with names/ and sha256/") {
		t.Errorf("missing store: %v", err)
	}
	_, _, err = runIngot(t, "recipe", "pin", "--store", store)
	if err != errUsage {
		t.Errorf("no recipe: %v", err)
	}
}

func TestRecipeChecks(t *testing.T) {
	out, _, err := runIngot(t, "recipe", "checks")
	wantExit(t, err, 0)
	if !strings.Contains(out, "nic-link        agent    bits-per-second") || !strings.Contains(out, "dcgm-diag       burn-in  none") {
		t.Errorf("recipe checks:\n%s", out)
	}
	out, _, err = runIngot(t, "recipe", "checks", "-o", "json")
	wantExit(t, err, 0)
	var specs []recipe.CheckSpec
	if err := json.Unmarshal([]byte(out), &specs); err != nil || len(specs) != len(recipe.Checks()) {
		t.Errorf("recipe checks -o json: %d specs, %v", len(specs), err)
	}
}

// TestRecipePinOversize: pin reads the recipe and the bases its extends
// chain names, nothing else beside it, and refuses an oversize recipe
// unread.
func TestRecipePinOversize(t *testing.T) {
	dir, store, sums := pinFixture(t)
	big, fifo := recipeTraps(t, dir)
	images := filepath.Join(recipeRoot(t), "testdata/recipes/images")
	train := filepath.Join(dir, "gpu-train-h100x8.yaml")
	out, _, err := runIngotNoHang(t, fifo, "recipe", "pin", "--store", store, "--images", images, train)
	wantExit(t, err, 0)
	for _, want := range []string{"pinned os.image.sha256 = " + sums["debian-12-nvidia-cuda.raw.zst"],
		"os.agent.kernel.sha256 is the placeholder it inherits: pin " + filepath.Join(dir, "base-gpu.yaml")} {
		if !strings.Contains(out, want) {
			t.Errorf("pin output lacks %q:\n%s", want, out)
		}
	}
	before, _ := os.ReadFile(big)
	_, _, err = runIngot(t, "recipe", "pin", "--store", store, big)
	if err == nil || !strings.Contains(err.Error(), "reading recipe: "+big+" is 11534364 bytes, over the limit of 1048576 bytes") {
		t.Errorf("pin of an oversize recipe: %v", err)
	}
	if after, _ := os.ReadFile(big); !bytes.Equal(before, after) {
		t.Error("a refused pin changed the file")
	}
}
