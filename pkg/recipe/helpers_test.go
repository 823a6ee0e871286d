package recipe

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoRoot is the module root (the folder holding go.mod).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

var update = flag.Bool("update", os.Getenv("UPDATE_TESTDATA") == "1", "rewrite golden files")

// golden compares got with the golden file, or rewrites it with
// UPDATE_TESTDATA=1.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading golden file (UPDATE_TESTDATA=1 writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; UPDATE_TESTDATA=1 rewrites it):\n%s", file, diff)
	}
}

func diagText(diags []Diagnostic) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(d.String() + "\n")
	}
	return b.String()
}

// withRelNames renames files relative to root, so goldens do not depend on
// where the repository is checked out.
func withRelNames(t *testing.T, root string, files []File) []File {
	t.Helper()
	for i := range files {
		rel, err := filepath.Rel(root, files[i].Name)
		if err != nil {
			t.Fatal(err)
		}
		files[i].Name = filepath.ToSlash(rel)
	}
	return files
}

// readTree reads every recipe file under dir, sub-folders included.
func readTree(t *testing.T, dir string) []File {
	t.Helper()
	var files []File
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !IsRecipeFile(p) {
			return err
		}
		data, err := os.ReadFile(p)
		files = append(files, File{Name: p, Data: data})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
