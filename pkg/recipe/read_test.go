package recipe

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// writeRecipe writes a file of dir and returns its path.
func writeRecipe(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// oversize writes a valid recipe named for its file, padded with a
// comment to size bytes.
func oversize(t testing.TB, dir, name string, size int) string {
	t.Helper()
	head := "name: " + strings.TrimSuffix(name, ".yaml") + "\nversion: 1.0.0\n"
	var b strings.Builder
	b.WriteString(head)
	for b.Len() < size {
		b.WriteString("# " + strings.Repeat("x", 77) + "\n")
	}
	return writeRecipe(t, dir, name, b.String()[:size-1]+"\n")
}

// traps puts beside the recipes of dir what lint must not open: a named
// pipe (opening it blocks until a writer comes; see noHang) and a folder,
// both named like recipes. It returns the pipe.
func traps(t *testing.T, dir string) string {
	t.Helper()
	fifo := filepath.Join(dir, "fifo.yaml")
	netnstest.NeedNoError(t, "mkfifo", syscall.Mkfifo(fifo, 0o644))
	if err := os.Mkdir(filepath.Join(dir, "folder.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	return fifo
}

// noHang runs f and fails the test if it is still running after a few
// seconds (it opened a named pipe of dir): it then opens the pipes for
// writing, so a reader gets end of file and f can return.
func noHang(t *testing.T, dir string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return
	case <-time.After(10 * time.Second):
		t.Errorf("still running after 10s: it opened a named pipe in %s", dir)
	}
	for {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Type()&os.ModeNamedPipe == 0 {
				continue
			}
			if w, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sizeMessage checks that a diagnostic or error text names the file, its
// size and the limit.
func sizeMessage(t *testing.T, msg, file string, size int) {
	t.Helper()
	for _, want := range []string{file, strconv.Itoa(size) + " bytes", "limit of 1048576 bytes (1MiB)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := traps(t, dir)
	atLimit := oversize(t, dir, "at-limit.yaml", MaxFileSize)
	if data, err := ReadFile(atLimit); err != nil || len(data) != MaxFileSize {
		t.Errorf("ReadFile of a file of MaxFileSize bytes = %d bytes, %v", len(data), err)
	}
	big := oversize(t, dir, "big.yaml", MaxFileSize+1)
	_, err := ReadFile(big)
	var se *SizeError
	if !errors.As(err, &se) || se.File != big || se.Size != MaxFileSize+1 || se.Limit != MaxFileSize {
		t.Fatalf("ReadFile of an oversize file: %#v, want a *SizeError", err)
	}
	sizeMessage(t, err.Error(), big, MaxFileSize+1)
	noHang(t, dir, func() {
		if _, err := ReadFile(fifo); err == nil || !strings.Contains(err.Error(), "is a named pipe, not a regular file") {
			t.Errorf("ReadFile of a named pipe: %v", err)
		}
	})
	if _, err := ReadFile(filepath.Join(dir, "folder.yaml")); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("ReadFile of a folder: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v, want ErrNotExist", err)
	}
	// Bytes that come from elsewhere (git, a caller) are bounded too.
	data, _ := os.ReadFile(big)
	if r, diags := Parse(big, data); r != nil || len(diags) != 1 {
		t.Errorf("Parse of %d bytes = %v, %v; want nil and the size error", len(data), r, diags)
	} else {
		sizeMessage(t, diags[0].Message, big, MaxFileSize+1)
	}
}

// TestLintOneFile: a file linted on its own is read with the bases its
// extends chain names and nothing else; a pipe, a folder and an oversize
// file beside it are never opened. Linting the folder reports them.
func TestLintOneFile(t *testing.T) {
	dir := t.TempDir()
	traps(t, dir)
	big := oversize(t, dir, "big.yaml", 11<<20)
	lone := writeRecipe(t, dir, "lone.yaml", "name: lone\nversion: 1.0.0\n")
	writeRecipe(t, dir, "base-x.yaml", "name: base-x\nversion: 1.0.0\ndrivers:\n  nvidia: 535.309.01\n")
	writeRecipe(t, dir, "mid-x.yaml", "name: mid-x\nversion: 1.0.0\nextends: base-x\n")
	child := writeRecipe(t, dir, "child.yaml", "name: child\nversion: 2.0.0\nextends: mid-x\nbios:\n  boot_mode: uefi\n")
	noHang(t, dir, func() {
		for _, f := range []string{lone, child} {
			diags, n := Options{}.Lint(f)
			if len(diags) != 0 || n != 1 {
				t.Errorf("Lint(%s) = %d files, diagnostics:\n%s", f, n, diagText(diags))
			}
		}
		set, diags := Options{}.LoadFile(child)
		if len(diags) != 0 || set.Len() != 3 {
			t.Fatalf("LoadFile(child) = %v, diagnostics:\n%s", set.Names(), diagText(diags))
		}
		if r, _ := set.Get("child"); r.Drivers["nvidia"] != "535.309.01" || r.Version != "2.0.0" {
			t.Errorf("child did not inherit from its base's base: drivers %v, version %s", r.Drivers, r.Version)
		}
	})
	// The folder: every file is linted; the pipe and the oversize file are
	// refused from their stat, the folder named .yaml is skipped.
	var (
		diags []Diagnostic
		n     int
	)
	noHang(t, dir, func() { diags, n = Options{}.Lint(dir) })
	if n != 6 {
		t.Errorf("Lint(folder) counted %d files, want 6", n)
	}
	var got []string
	for _, d := range diags {
		got = append(got, filepath.Base(d.File))
		switch filepath.Base(d.File) {
		case "big.yaml":
			sizeMessage(t, d.String(), big, 11<<20)
		case "fifo.yaml":
			if !strings.Contains(d.Message, "is a named pipe, not a regular file") {
				t.Errorf("fifo: %s", d)
			}
		}
	}
	if strings.Join(got, " ") != "big.yaml fifo.yaml" {
		t.Errorf("Lint(folder) reported %v, want big.yaml and fifo.yaml:\n%s", got, diagText(diags))
	}
	// The oversize file named alone is refused, still counted as a file.
	noHang(t, dir, func() { diags, n = Options{}.Lint(big) })
	if n != 1 || len(diags) != 1 {
		t.Fatalf("Lint(big) = %d files, diagnostics:\n%s", n, diagText(diags))
	}
	sizeMessage(t, diags[0].String(), big, 11<<20)
}

// TestLintOneFileExtendsErrors: a missing base, an unreadable base and a
// cycle are errors on the file that names them, found reading only the
// chain (a did-you-mean comes from the names of the files beside it).
func TestLintOneFileExtendsErrors(t *testing.T) {
	dir := t.TempDir()
	fifo := traps(t, dir)
	oversize(t, dir, "big.yaml", MaxFileSize+10)
	writeRecipe(t, dir, "cycle-a.yaml", "name: cycle-a\nversion: 1.0.0\nextends: cycle-b\n")
	writeRecipe(t, dir, "cycle-b.yaml", "name: cycle-b\nversion: 1.0.0\nextends: cycle-a\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "base-gpu.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ extends, want string }{
		"missing":     {"extends: base-gpus", `extends: no recipe named "base-gpus" in this set (did you mean "base-gpu"?)`},
		"oversize":    {"extends: big", `extends: base recipe "big" could not be read: ` + filepath.Join(dir, "big.yaml") + " is 1048586 bytes, over the limit of 1048576 bytes"},
		"not-regular": {"extends: fifo", `extends: base recipe "fifo" could not be read: ` + fifo + " is a named pipe"},
		"path":        {"extends: ../cycle-a", `extends: no recipe named "../cycle-a" in this set`},
		"cycle-a":     {"", "extends: extends cycle: cycle-a -> cycle-b -> cycle-a"},
	}
	noHang(t, dir, func() {
		for name, c := range cases {
			file := filepath.Join(dir, name+".yaml")
			if c.extends != "" {
				writeRecipe(t, dir, name+".yaml", "name: "+name+"\nversion: 1.0.0\n"+c.extends+"\n")
			}
			diags, _ := Options{}.Lint(file)
			if len(diags) != 1 || diags[0].File != file || !strings.Contains(diags[0].String(), c.want) {
				t.Errorf("%s: got\n%s\nwant one error on %s containing %q", name, diagText(diags), file, c.want)
			}
		}
	})
}

// TestLintMemory: linting a small recipe beside an 11 MB one allocates
// what the small one needs, not what the big one would (the big file read
// and parsed cost 500 MB before).
func TestLintMemory(t *testing.T) {
	dir := t.TempDir()
	oversize(t, dir, "big.yaml", 11<<20)
	small := writeRecipe(t, dir, "small.yaml", "name: small\nversion: 1.0.0\n")
	Options{}.Lint(small) // warm up: lazily built tables are not this lint's cost
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	diags, n := Options{}.Lint(small)
	runtime.ReadMemStats(&after)
	if len(diags) != 0 || n != 1 {
		t.Fatalf("Lint(small) = %d files, diagnostics:\n%s", n, diagText(diags))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("linting a 28-byte recipe allocated %d bytes, want under 1 MiB", alloc)
	} else {
		t.Logf("allocated %d bytes", alloc)
	}
}
