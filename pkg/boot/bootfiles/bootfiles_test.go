package bootfiles

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

func TestCleanPath(t *testing.T) {
	tests := map[string]struct {
		in, want string
		err      error
	}{
		"plain":          {in: "undionly.kpxe", want: "undionly.kpxe"},
		"subdir":         {in: "efi/snponly.efi", want: "efi/snponly.efi"},
		"dot elements":   {in: "./efi/./snponly.efi", want: "efi/snponly.efi"},
		"double slash":   {in: "efi//snponly.efi", want: "efi/snponly.efi"},
		"dos separators": {in: `efi\snponly.efi`, want: "efi/snponly.efi"},
		"empty":          {in: "", err: ErrBadPath},
		"only dot":       {in: ".", err: ErrBadPath},
		"parent":         {in: "../etc/passwd", err: ErrBadPath},
		"inner parent":   {in: "efi/../../etc/passwd", err: ErrBadPath},
		"parent at end":  {in: "efi/..", err: ErrBadPath},
		"dos parent":     {in: `..\etc\passwd`, err: ErrBadPath},
		"absolute":       {in: "/etc/passwd", err: ErrBadPath},
		"dos absolute":   {in: `\etc\passwd`, err: ErrBadPath},
		"nul":            {in: "a\x00b", err: ErrBadPath},
		"newline":        {in: "a\nb", err: ErrBadPath},
		"too long":       {in: string(make([]byte, 300)), err: ErrBadPath},
		"dots in name":   {in: "..foo", want: "..foo"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := CleanPath(tc.in)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("CleanPath(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	base := t.TempDir()
	over, dist, boot := filepath.Join(base, "over"), filepath.Join(base, "dist"), filepath.Join(base, "boot")
	for _, d := range []string{over, dist, boot, filepath.Join(dist, "sub")} {
		os.MkdirAll(d, 0o755)
	}
	write := func(p, s string) { os.WriteFile(p, []byte(s), 0o644) }
	write(filepath.Join(dist, "undionly.kpxe"), "dist")
	write(filepath.Join(over, "undionly.kpxe"), "override")
	write(filepath.Join(dist, "snponly.efi"), "snp")
	write(filepath.Join(boot, "ipxe.efi"), "boot ipxe")
	write(filepath.Join(base, "secret"), "secret")
	os.Symlink(filepath.Join(boot, "ipxe.efi"), filepath.Join(dist, "ipxe.efi")) // Debian layout
	os.Symlink("snponly.efi", filepath.Join(dist, "inner-link"))                 // relative, stays inside
	os.Symlink(filepath.Join(base, "secret"), filepath.Join(dist, "escape"))     // absolute escape
	os.Symlink("../secret", filepath.Join(dist, "rel-escape"))                   // relative escape
	os.Symlink(base, filepath.Join(dist, "dirlink"))                             // directory escape
	os.Symlink("/dev/zero", filepath.Join(dist, "dev"))                          // device outside
	if err := syscall.Mkfifo(filepath.Join(dist, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := New([]string{over, dist, filepath.Join(base, "missing")}, []string{boot})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		name, want string
		err        error
	}{
		"override wins":            {name: "undionly.kpxe", want: "override"},
		"falls through":            {name: "snponly.efi", want: "snp"},
		"symlink to allowed /boot": {name: "ipxe.efi", want: "boot ipxe"},
		"symlink inside":           {name: "inner-link", want: "snp"},
		"absolute symlink escape":  {name: "escape", err: ErrNotFound}, // found nowhere allowed
		"relative symlink escape":  {name: "rel-escape", err: ErrNotFound},
		"directory symlink":        {name: "dirlink/secret", err: ErrNotFound},
		"device":                   {name: "dev", err: ErrNotFound},
		"fifo":                     {name: "fifo", err: ErrNotFile},
		"directory":                {name: "sub", err: ErrNotFile},
		"traversal":                {name: "../secret", err: ErrBadPath},
		"missing":                  {name: "nope", err: ErrNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := d.Open(tc.name)
			if tc.err != nil {
				if f != nil {
					f.Close()
				}
				// Escapes are reported as ErrEscape by the directory that had
				// the name; with only one root holding it, that is the error.
				if !errors.Is(err, tc.err) && !errors.Is(err, ErrEscape) {
					t.Fatalf("Open(%q) error %v, want %v or ErrEscape", tc.name, err, tc.err)
				}
				if err == nil {
					t.Fatalf("Open(%q) succeeded", tc.name)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.name, err)
			}
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != tc.want {
				t.Fatalf("Open(%q) read %q, want %q", tc.name, b, tc.want)
			}
		})
	}
}

func TestDeviceNodeInsideRoot(t *testing.T) {
	dir := t.TempDir()
	// /dev/null's numbers: 1,3. Needs root (CAP_MKNOD).
	netnstest.NeedNoError(t, "mknod needs root (CAP_MKNOD)", syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3))
	d, _ := New([]string{dir}, nil)
	if f, err := d.Open("null"); !errors.Is(err, ErrNotFile) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("Open(device node) = %v, want ErrNotFile", err)
	}
}

// A link target may be a file: symlinks may point at exactly it, and
// another file beside it (the rest of /boot) is not served.
func TestLinkTargetFile(t *testing.T) {
	base := t.TempDir()
	dist, boot := filepath.Join(base, "dist"), filepath.Join(base, "boot")
	os.MkdirAll(dist, 0o755)
	os.MkdirAll(boot, 0o755)
	os.WriteFile(filepath.Join(boot, "ipxe.efi"), []byte("boot ipxe"), 0o644)
	os.WriteFile(filepath.Join(boot, "vmlinuz"), []byte("the host's kernel"), 0o644)
	os.Symlink(filepath.Join(boot, "ipxe.efi"), filepath.Join(dist, "ipxe.efi"))
	os.Symlink(filepath.Join(boot, "vmlinuz"), filepath.Join(dist, "vmlinuz"))
	d, err := New([]string{dist}, []string{filepath.Join(boot, "ipxe.efi"), filepath.Join(base, "nope")})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Open("ipxe.efi")
	if err != nil {
		t.Fatalf("the allowed link target: %v", err)
	}
	f.Close()
	if f, err := d.Open("vmlinuz"); err == nil {
		f.Close()
		t.Error("a symlink to another file of the target's folder was served")
	}
}
