package tftp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
)

// FuzzTFTPPath feeds arbitrary requested names to the path validation and
// the rooted opener: whatever is accepted must stay inside the root, and
// only the one file inside may ever be opened.
func FuzzTFTPPath(f *testing.F) {
	for _, s := range []string{"undionly.kpxe", "efi/snponly.efi", "../secret", "/etc/passwd", `..\secret`,
		"a/../../secret", "link", "link/x", ".", "", "a\x00b", "inside/../inside/f"} {
		f.Add(s)
	}
	base := f.TempDir()
	root := filepath.Join(base, "root")
	os.MkdirAll(filepath.Join(root, "inside"), 0o755)
	os.WriteFile(filepath.Join(root, "inside", "f"), []byte("ok"), 0o644)
	os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o644)
	os.Symlink(base, filepath.Join(root, "link"))
	dirs, err := bootfiles.New([]string{root}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		rel, err := bootfiles.CleanPath(name)
		if err == nil {
			if strings.HasPrefix(rel, "/") || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/../") || strings.HasSuffix(rel, "/..") {
				t.Fatalf("CleanPath(%q) = %q: escapes", name, rel)
			}
			if j := filepath.Join(root, rel); !strings.HasPrefix(j, root+"/") {
				t.Fatalf("CleanPath(%q) = %q joins to %q outside %q", name, rel, j, root)
			}
		}
		fh, err := dirs.Open(name)
		if err != nil {
			return
		}
		defer fh.Close()
		b := make([]byte, 16)
		n, _ := fh.Read(b)
		if string(b[:n]) != "ok" {
			t.Fatalf("Open(%q) opened a file reading %q: outside the root", name, b[:n])
		}
	})
}
