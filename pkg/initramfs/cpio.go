// Package initramfs writes and reads reproducible newc cpio archives, the
// format Linux unpacks into its initial root filesystem, and builds the
// agent's initramfs from a Debian kernel package.
//
// Reproducible means: the same entries give byte-identical output. Entries
// are sorted by name, every parent directory is present, owners are 0:0,
// every mtime is the one given, inode numbers count up from 1 in name order
// and nlink is 1 for files and 2 for directories.
package initramfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Type bits of a newc mode (the same values as st_mode).
const (
	modeTypeMask = 0o170000
	modeDir      = 0o040000
	modeFile     = 0o100000
	modeSymlink  = 0o120000
)

// newcMagic opens every newc header ("new ASCII" format, no checksum).
const newcMagic = "070701"

// trailerName is the name of the entry that ends an archive.
const trailerName = "TRAILER!!!"

// headerLen is the length of a newc header before the name.
const headerLen = 110

// Entry is one member of an archive.
type Entry struct {
	// Name is the path inside the archive, without a leading slash.
	Name string
	// Mode holds the type bits (directory, file, symlink) and permissions.
	Mode uint32
	// Data is a file's content or a symlink's target.
	Data []byte
	// MTime is seconds since the epoch (set by the Archive when writing).
	MTime int64
}

// IsDir reports whether e is a directory.
func (e Entry) IsDir() bool { return e.Mode&modeTypeMask == modeDir }

// String formats e like one line of `cpio -tv`, enough for `ingot initramfs ls`.
func (e Entry) String() string {
	t := "-"
	switch e.Mode & modeTypeMask {
	case modeDir:
		t = "d"
	case modeSymlink:
		return fmt.Sprintf("l%s %9d %s -> %s", fs.FileMode(e.Mode & 0o777).String()[1:], len(e.Data), e.Name, e.Data)
	}
	return fmt.Sprintf("%s%s %9d %s", t, fs.FileMode(e.Mode & 0o777).String()[1:], len(e.Data), e.Name)
}

// Archive collects entries and writes them as one reproducible newc stream.
// The zero value is empty and ready to use.
type Archive struct {
	entries map[string]Entry
}

// cleanName turns p into an archive name: relative, slash-separated, clean.
func cleanName(p string) (string, error) {
	n := strings.TrimPrefix(path.Clean("/"+p), "/")
	if n == "" || n == "." {
		return "", fmt.Errorf("archive path %q: expected a file name below /", p)
	}
	return n, nil
}

func (a *Archive) add(p string, mode uint32, data []byte) error {
	name, err := cleanName(p)
	if err != nil {
		return err
	}
	if a.entries == nil {
		a.entries = map[string]Entry{}
	}
	if old, ok := a.entries[name]; ok && old.IsDir() && mode&modeTypeMask == modeDir {
		return nil
	}
	a.entries[name] = Entry{Name: name, Mode: mode, Data: data}
	return nil
}

// AddFile adds a regular file with permissions perm (e.g. 0o755). A later
// call with the same name replaces the earlier one.
func (a *Archive) AddFile(name string, perm fs.FileMode, data []byte) error {
	return a.add(name, modeFile|uint32(perm.Perm()), data)
}

// AddDir adds a directory with permissions perm.
func (a *Archive) AddDir(name string, perm fs.FileMode) error {
	return a.add(name, modeDir|uint32(perm.Perm()), nil)
}

// AddSymlink adds a symbolic link name -> target.
func (a *Archive) AddSymlink(name, target string) error {
	return a.add(name, modeSymlink|0o777, []byte(target))
}

// Entries returns the entries WriteTo would write, in order: parents added
// (0755) and everything sorted by name, with mtime set.
func (a *Archive) Entries(mtime int64) []Entry {
	all := map[string]Entry{}
	for n, e := range a.entries {
		all[n] = e
		for d := path.Dir(n); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := a.entries[d]; !ok {
				all[d] = Entry{Name: d, Mode: modeDir | 0o755}
			}
		}
	}
	out := make([]Entry, 0, len(all))
	for _, e := range all {
		e.MTime = mtime
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// WriteTo writes the archive as newc to w, every mtime set to mtime.
func (a *Archive) WriteTo(w io.Writer, mtime int64) error {
	var buf bytes.Buffer
	for i, e := range a.Entries(mtime) {
		nlink := uint32(1)
		if e.IsDir() {
			nlink = 2
		}
		writeEntry(&buf, uint32(i+1), nlink, e)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("writing cpio entry %s: %w", e.Name, err)
		}
		buf.Reset()
	}
	writeEntry(&buf, 0, 1, Entry{Name: trailerName})
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing cpio trailer: %w", err)
	}
	return nil
}

// writeEntry appends one newc header, name and data, each padded to 4 bytes.
func writeEntry(b *bytes.Buffer, ino, nlink uint32, e Entry) {
	fmt.Fprintf(b, "%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		newcMagic, ino, e.Mode, 0, 0, nlink, uint32(e.MTime), len(e.Data), 0, 0, 0, 0, len(e.Name)+1, 0)
	b.WriteString(e.Name)
	b.WriteByte(0)
	pad4(b, headerLen+len(e.Name)+1)
	b.Write(e.Data)
	pad4(b, len(e.Data))
}

func pad4(b *bytes.Buffer, n int) {
	for ; n%4 != 0; n++ {
		b.WriteByte(0)
	}
}

// Limits on what Read accepts, so a hostile archive cannot exhaust memory.
const (
	maxNameLen = 4096
	// MaxFileSize is the largest member Read accepts.
	MaxFileSize = 1 << 30
)

// ErrFormat is wrapped by every error Read returns for malformed input.
var ErrFormat = errors.New("malformed newc cpio")

// Read parses a newc archive up to its trailer and returns its entries in
// archive order. It reads uncompressed cpio; see Decompress.
func Read(r io.Reader) ([]Entry, error) {
	var out []Entry
	var off int64
	for {
		e, n, err := readEntry(r, off)
		if err != nil {
			return out, err
		}
		off += n
		if e.Name == trailerName {
			return out, nil
		}
		out = append(out, e)
	}
}

// readEntry reads one entry starting at offset off; it returns the bytes used.
func readEntry(r io.Reader, off int64) (Entry, int64, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Entry{}, 0, fmt.Errorf("%w: header at offset %d: %v (expected 110 bytes, archive ended before its trailer)", ErrFormat, off, err)
	}
	if string(h[:6]) != newcMagic {
		return Entry{}, 0, fmt.Errorf("%w: header at offset %d: magic %q, expected %q", ErrFormat, off, h[:6], newcMagic)
	}
	var f [13]uint32
	for i := range f {
		v, err := parseHex(h[6+8*i : 14+8*i])
		if err != nil {
			return Entry{}, 0, fmt.Errorf("%w: header at offset %d field %d: %v", ErrFormat, off, i, err)
		}
		f[i] = v
	}
	mode, mtime, size, namesize := f[1], f[5], f[6], f[11]
	if namesize == 0 || namesize > maxNameLen {
		return Entry{}, 0, fmt.Errorf("%w: header at offset %d: name size %d, expected 1..%d", ErrFormat, off, namesize, maxNameLen)
	}
	if size > MaxFileSize {
		return Entry{}, 0, fmt.Errorf("%w: header at offset %d: file size %d over the %d limit", ErrFormat, off, size, MaxFileSize)
	}
	nameLen := align4(headerLen+int64(namesize)) - headerLen
	name := make([]byte, nameLen)
	if _, err := io.ReadFull(r, name); err != nil {
		return Entry{}, 0, fmt.Errorf("%w: name at offset %d: %v", ErrFormat, off+headerLen, err)
	}
	if name[namesize-1] != 0 {
		return Entry{}, 0, fmt.Errorf("%w: name at offset %d is not NUL-terminated", ErrFormat, off+headerLen)
	}
	e := Entry{Name: string(name[:namesize-1]), Mode: mode, MTime: int64(mtime)}
	var data bytes.Buffer
	dataLen := align4(int64(size))
	if n, err := io.CopyN(&data, r, dataLen); err != nil {
		return Entry{}, 0, fmt.Errorf("%w: data of %s at offset %d: got %d of %d bytes: %v", ErrFormat, e.Name, off+headerLen+nameLen, n, dataLen, err)
	}
	e.Data = data.Bytes()[:size]
	return e, headerLen + nameLen + dataLen, nil
}

func align4(n int64) int64 { return (n + 3) &^ 3 }

func parseHex(b []byte) (uint32, error) {
	var v uint32
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, fmt.Errorf("%q is not hexadecimal", b)
		}
		v = v<<4 | uint32(c)
	}
	return v, nil
}
