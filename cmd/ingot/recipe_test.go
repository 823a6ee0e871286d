package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// recipeRoot changes into the module root so paths in outputs are the
// short relative ones a user sees, and returns it.
func recipeRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("go.mod not found")
		}
		dir = filepath.Dir(dir)
	}
	t.Chdir(dir)
	return dir
}

// runIngot runs the ingot command in-process.
func runIngot(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

func checkGolden(t *testing.T, file, got string) {
	t.Helper()
	if os.Getenv("UPDATE_TESTDATA") == "1" {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading golden (UPDATE_TESTDATA=1 writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; UPDATE_TESTDATA=1 rewrites it):\n%s", file, diff)
	}
}

func wantExit(t *testing.T, err error, code int) {
	t.Helper()
	var ee exitError
	if code == 0 && err != nil || code != 0 && (!errors.As(err, &ee) || int(ee) != code) {
		t.Fatalf("error = %v, want exit status %d", err, code)
	}
}

func TestRecipeLintShipped(t *testing.T) {
	recipeRoot(t)
	out, errOut, err := runIngot(t, "recipe", "lint", "--images", "testdata/recipes/images")
	wantExit(t, err, 0)
	if out != "" || errOut != "" {
		t.Errorf("lint of recipes/ printed %q %q", out, errOut)
	}
	out, _, err = runIngot(t, "recipe", "lint", "--images", "testdata/recipes/images", "--format", "json")
	wantExit(t, err, 0)
	if out != "[]\n" {
		t.Errorf("clean lint as JSON = %q, want []", out)
	}
	// A file given alone is linted with the recipes beside it (its base).
	_, _, err = runIngot(t, "recipe", "lint", "--images", "testdata/recipes/images", "recipes/gpu-train-h100x8.yaml")
	wantExit(t, err, 0)
	// Without the images the shipped recipes name, lint fails on them.
	out, _, err = runIngot(t, "recipe", "lint", "--images", t.TempDir(), "recipes/lab-qemu.yaml")
	wantExit(t, err, 1)
	if !regexp.MustCompile(`recipes/lab-qemu\.yaml:\d+:11: error: os\.image\.name: image "lab" not found`).MatchString(out) {
		t.Errorf("missing image not reported: %q", out)
	}
}

// TestRecipeLintFormats: golden output in every format for a mix of broken
// recipes; exit status 1.
func TestRecipeLintFormats(t *testing.T) {
	recipeRoot(t)
	paths := []string{"testdata/recipes/broken/many-errors", "testdata/recipes/broken/extends-cycle",
		"testdata/recipes/broken/unknown-field/unknown-field.yaml", "testdata/recipes/broken/bad-sha256"}
	for _, format := range []string{"text", "json", "github"} {
		t.Run(format, func(t *testing.T) {
			args := append([]string{"recipe", "lint", "--images", "testdata/recipes/images", "--format", format}, paths...)
			out, errOut, err := runIngot(t, args...)
			wantExit(t, err, 1)
			if !strings.Contains(errOut, "15 error(s), 0 warning(s) in 5 recipe file(s)") {
				t.Errorf("stderr = %q", errOut)
			}
			checkGolden(t, filepath.Join("testdata/recipes/golden", "lint."+format), out)
		})
	}
}

func TestRecipeLintUsage(t *testing.T) {
	recipeRoot(t)
	_, _, err := runIngot(t, "recipe", "lint", "--format", "xml")
	if !errors.Is(err, errUsage) {
		t.Errorf("--format xml: %v, want usage error", err)
	}
	_, errOut, err := runIngot(t, "recipe", "lint", t.TempDir())
	wantExit(t, err, 1)
	if !strings.Contains(errOut, "no recipe files") {
		t.Errorf("empty folder: %q", errOut)
	}
}

const diffOld, diffNew = "pkg/recipe/testdata/diff/old", "pkg/recipe/testdata/diff/new"

func TestRecipeDiffFolders(t *testing.T) {
	recipeRoot(t)
	out, _, err := runIngot(t, "recipe", "diff", diffOld, diffNew)
	wantExit(t, err, 0)
	checkGolden(t, "testdata/recipes/golden/diff.txt", out)
	out, _, err = runIngot(t, "recipe", "diff", "-o", "json", diffOld, diffNew)
	wantExit(t, err, 0)
	checkGolden(t, "testdata/recipes/golden/diff.json", out)
	out, _, err = runIngot(t, "recipe", "diff", "recipes", "recipes")
	wantExit(t, err, 0)
	if out != "no recipe changes\n" {
		t.Errorf("diff of a folder with itself: %q", out)
	}
}

func TestRecipeDiffFiles(t *testing.T) {
	recipeRoot(t)
	out, _, err := runIngot(t, "recipe", "diff", diffOld+"/train.yaml", diffNew+"/train.yaml")
	wantExit(t, err, 0)
	for _, want := range []string{"train:\n", "  GPU count 8 -> 4\n", "  BIOS SriovGlobalEnable: Disabled -> Enabled\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("file diff lacks %q:\n%s", want, out)
		}
	}
	_, _, err = runIngot(t, "recipe", "diff", diffOld+"/train.yaml", diffNew)
	if err == nil || !strings.Contains(err.Error(), "expected two files") {
		t.Errorf("file vs folder: %v", err)
	}
	_, _, err = runIngot(t, "recipe", "diff", "no-such-rev-or-path", diffNew)
	if err == nil || !strings.Contains(err.Error(), "neither an existing path nor a git revision") {
		t.Errorf("bad revision: %v", err)
	}
}

// TestRecipeDiffGit: two git revisions of recipes/ in a real repository
// give the same diff as the two folders.
func TestRecipeDiffGit(t *testing.T) {
	root := recipeRoot(t)
	netnstest.NeedPrograms(t, "git")
	repo := t.TempDir()
	gitIn := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	copyDir := func(from string) {
		t.Helper()
		os.RemoveAll(filepath.Join(repo, "recipes"))
		if err := os.CopyFS(filepath.Join(repo, "recipes"), os.DirFS(filepath.Join(root, from))); err != nil {
			t.Fatal(err)
		}
	}
	gitIn("init", "-q")
	copyDir(diffOld)
	gitIn("add", "-A")
	gitIn("commit", "-q", "-m", "old")
	copyDir(diffNew)
	gitIn("add", "-A")
	gitIn("commit", "-q", "-m", "new")
	t.Chdir(filepath.Join(repo, "recipes")) // revisions resolve from anywhere in the work tree
	out, errOut, err := runIngot(t, "recipe", "diff", "HEAD~1", "HEAD")
	wantExit(t, err, 0)
	want, _ := os.ReadFile(filepath.Join(root, "testdata/recipes/golden/diff.txt"))
	if diff := cmp.Diff(string(want), out); diff != "" {
		t.Errorf("git diff differs from the folder diff (-want +got):\n%s\nstderr: %s", diff, errOut)
	}
}

// TestRecipeDiffMachines: with --affected, each changed recipe lists the
// machines enrolled with it, asked of a running server.
func TestRecipeDiffMachines(t *testing.T) {
	recipeRoot(t)
	root, _ := os.Getwd()
	s := startServe(t, filepath.Join(root, "pkg/recipe/testdata/diff/old"))
	s.ok("machine", "add", "h100-a01-01", "--recipe", "train", "--mac", "52:54:00:00:00:01")
	s.ok("machine", "add", "h100-a01-02", "--recipe", "train", "--mac", "52:54:00:00:00:02")
	s.ok("machine", "add", "l40s-b01-01", "--recipe", "retired", "--mac", "52:54:00:00:00:03")
	out, _, err := runIngot(t, "recipe", "diff", "--affected", diffOld, diffNew)
	wantExit(t, err, 0)
	for _, want := range []string{"  machines using it (2): h100-a01-01, h100-a01-02\n", "  machines using it (0): none\n",
		"retired:\n  recipe removed\n  machines using it (1): l40s-b01-01\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff --affected lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runIngot(t, "recipe", "diff", "--affected", "-o", "json", diffOld, diffNew)
	wantExit(t, err, 0)
	if !strings.Contains(out, "\"machines\": [\n      \"h100-a01-01\",\n      \"h100-a01-02\"\n    ]") {
		t.Errorf("json lacks the machines:\n%s", out)
	}
	out, _, err = runIngot(t, "recipe", "diff", diffOld, diffNew)
	wantExit(t, err, 0)
	if strings.Contains(out, "machines using it") {
		t.Errorf("a diff without --affected asked the server:\n%s", out)
	}
	_, _, err = runIngot(t, "recipe", "diff", "--affected", "--server", "http://"+freePort(t), diffOld, diffNew)
	if err == nil || !strings.Contains(err.Error(), "recipe diff --affected") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("no server: %v", err)
	}
}

func TestRecipeSchemaAndShow(t *testing.T) {
	recipeRoot(t)
	out, _, err := runIngot(t, "recipe", "schema")
	wantExit(t, err, 0)
	want, _ := os.ReadFile("pkg/recipe/testdata/schema.json")
	if out != string(want) {
		t.Error("ingot recipe schema differs from pkg/recipe/testdata/schema.json")
	}
	out, _, err = runIngot(t, "recipe", "show", "gpu-infer-l40sx4")
	wantExit(t, err, 0)
	for _, want := range []string{`"name": "gpu-infer-l40sx4"`, `"SriovGlobalEnable": "Enabled"`, `"min_vram": "44GiB"`, `"post": "15m"`} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %s", want)
		}
	}
}

func TestGitHubEscaping(t *testing.T) {
	if got := ghData("50% of a\nb: c, d"); got != "50%25 of a%0Ab: c, d" {
		t.Errorf("ghData = %q", got)
	}
	if got := ghProperty("HEAD~1:recipes/a,b.yaml"); got != "HEAD~1%3Arecipes/a%2Cb.yaml" {
		t.Errorf("ghProperty = %q", got)
	}
}

// recipeTraps puts beside the recipes of dir what linting one file must
// not open: an 11 MB recipe, a named pipe (opening it blocks until a
// writer comes) and a folder named like a recipe. It returns the big file
// and the pipe.
func recipeTraps(t *testing.T, dir string) (big, fifo string) {
	t.Helper()
	big = filepath.Join(dir, "big.yaml")
	body := "name: big\nversion: 1.0.0\n# " + strings.Repeat("x", 11<<20) + "\n"
	if err := os.WriteFile(big, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo = filepath.Join(dir, "fifo.yaml")
	netnstest.NeedNoError(t, "mkfifo", syscall.Mkfifo(fifo, 0o644))
	if err := os.Mkdir(filepath.Join(dir, "folder.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	return big, fifo
}

// runIngotNoHang is runIngot that fails if the command is still running
// after 10 s (it opened fifo); it then writes to fifo so the command ends.
func runIngotNoHang(t *testing.T, fifo string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); stdout, stderr, err = runIngot(t, args...) }()
	select {
	case <-done:
		return stdout, stderr, err
	case <-time.After(10 * time.Second):
		t.Errorf("ingot %v still running after 10s: it opened the named pipe %s", args, fifo)
	}
	for {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		select {
		case <-done:
			return stdout, stderr, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestRecipeLintOneFile: `ingot recipe lint FILE` reads FILE and the bases
// its extends chain names, nothing else beside it; the folder is linted
// whole, and its oversize file and pipe are refused unread.
func TestRecipeLintOneFile(t *testing.T) {
	dir := t.TempDir()
	big, fifo := recipeTraps(t, dir)
	for name, body := range map[string]string{
		"base-x.yaml": "name: base-x\nversion: 1.0.0\nbios:\n  boot_mode: uefi\n",
		"child.yaml":  "name: child\nversion: 1.0.0\nextends: base-x\n",
		"lone.yaml":   "name: lone\nversion: 1.0.0\n",
		"orphan.yaml": "name: orphan\nversion: 1.0.0\nextends: base-y\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"lone.yaml", "child.yaml"} {
		out, errOut, err := runIngotNoHang(t, fifo, "recipe", "lint", "--images", "", filepath.Join(dir, f))
		wantExit(t, err, 0)
		if out != "" || errOut != "" {
			t.Errorf("lint %s printed %q %q", f, out, errOut)
		}
	}
	out, _, err := runIngotNoHang(t, fifo, "recipe", "lint", "--images", "", filepath.Join(dir, "orphan.yaml"))
	wantExit(t, err, 1)
	if want := filepath.Join(dir, "orphan.yaml") + `:3:10: error: extends: no recipe named "base-y" in this set (did you mean "base-x"?)`; !strings.Contains(out, want) {
		t.Errorf("missing base: %q, want %q", out, want)
	}
	out, errOut, err := runIngotNoHang(t, fifo, "recipe", "lint", "--images", "", dir)
	wantExit(t, err, 1)
	for _, want := range []string{big + ":1:1: error: reading recipe: " + big + " is 11534364 bytes, over the limit of 1048576 bytes (1MiB)",
		fifo + ":1:1: error: reading recipe: " + fifo + " is a named pipe, not a regular file"} {
		if !strings.Contains(out, want) {
			t.Errorf("lint of the folder lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "3 error(s), 0 warning(s) in 6 recipe file(s)") {
		t.Errorf("lint of the folder: stderr %q", errOut)
	}
	out, _, err = runIngot(t, "recipe", "lint", "--images", "", big)
	wantExit(t, err, 1)
	if !strings.Contains(out, "is 11534364 bytes, over the limit of 1048576 bytes") {
		t.Errorf("lint of the oversize file: %q", out)
	}
}

// TestRecipeDiffOversize: diff reads one file with its bases only, and
// refuses an oversize file, on disk or at a git revision, unread.
func TestRecipeDiffOversize(t *testing.T) {
	dir := t.TempDir()
	big, fifo := recipeTraps(t, dir)
	a := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(a, []byte("name: a\nversion: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runIngotNoHang(t, fifo, "recipe", "diff", a, a)
	wantExit(t, err, 0)
	if out != "no recipe changes\n" {
		t.Errorf("diff of a file with itself: %q", out)
	}
	_, _, err = runIngotNoHang(t, fifo, "recipe", "diff", a, big)
	if err == nil || !strings.Contains(err.Error(), big+" is 11534364 bytes, over the limit of 1048576 bytes") {
		t.Errorf("diff with an oversize file: %v", err)
	}

	netnstest.NeedPrograms(t, "git")
	repo := t.TempDir()
	recipeDir := filepath.Join(repo, "recipes")
	if err := os.Mkdir(recipeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(big)
	os.WriteFile(filepath.Join(recipeDir, "big.yaml"), data, 0o644)
	os.WriteFile(filepath.Join(recipeDir, "a.yaml"), []byte("name: a\nversion: 1.0.0\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "big"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	t.Chdir(repo)
	files, diags, err := gitRecipeFiles(context.Background(), "HEAD", "recipes")
	if err != nil || len(files) != 1 || files[0].Name != "HEAD:recipes/a.yaml" || len(diags) != 1 ||
		!strings.Contains(diags[0].String(), "HEAD:recipes/big.yaml:1:1: error: reading recipe: HEAD:recipes/big.yaml is 11534364 bytes, over the limit") {
		t.Errorf("recipe files at HEAD: %v, %v, %v", files, diags, err)
	}
}
