// Package debpkg writes Debian binary packages (deb(5)) reproducibly: the
// same Package gives the same bytes, whoever builds it, wherever, whenever.
// Every tar entry is owned by root:root with the mode given, dated
// Package.MTime (SOURCE_DATE_EPOCH), and entries are sorted by path,
// parents first; gzip headers carry no name and no time; the ar members are
// dated MTime too. dpkg-deb does the same with --root-owner-group and
// SOURCE_DATE_EPOCH when the staged files' modes and mtimes are set; this
// needs no staging folder, no fakeroot and no dpkg on the build host.
package debpkg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// File is one entry of the installed tree.
type File struct {
	Path     string      // absolute: /usr/bin/ingot
	Mode     fs.FileMode // permission bits, plus fs.ModeDir or fs.ModeSymlink
	Body     []byte      // a regular file's contents
	Link     string      // a symlink's target
	Conffile bool        // dpkg keeps the admin's changes (files under /etc)
}

// Package is a binary package: its control fields, files and maintainer
// scripts (preinst, postinst, prerm, postrm; installed 0755).
type Package struct {
	Control Control
	Files   []File
	Scripts map[string][]byte
	MTime   time.Time
}

// FileName is the conventional name, NAME_VERSION_ARCH.deb (the epoch, if
// any, left out as dpkg-name does).
func (p *Package) FileName() string {
	v := p.Control.Version
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	return fmt.Sprintf("%s_%s_%s.deb", p.Control.Package, v, p.Control.Architecture)
}

// Write writes the .deb: an ar archive of debian-binary, control.tar.gz
// and data.tar.gz.
func (p *Package) Write(w io.Writer) error {
	if err := p.Control.check(); err != nil {
		return err
	}
	files, err := tree(p.Files)
	if err != nil {
		return err
	}
	data, err := p.tarGz(files)
	if err != nil {
		return fmt.Errorf("data.tar.gz: %w", err)
	}
	control, err := p.controlTar(files)
	if err != nil {
		return fmt.Errorf("control.tar.gz: %w", err)
	}
	a := arWriter{w: w, mtime: p.MTime.Unix()}
	a.header()
	a.member("debian-binary", []byte("2.0\n"))
	a.member("control.tar.gz", control)
	a.member("data.tar.gz", data)
	return a.err
}

// tree checks paths and adds every missing parent folder (0755), sorted
// so that a folder precedes what it holds.
func tree(in []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range in {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("file %q: expected a clean absolute path below /", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("file %s given twice", f.Path)
		}
		if f.Conffile && (f.Mode.Type() != 0 || !strings.HasPrefix(f.Path, "/etc/")) {
			return nil, fmt.Errorf("conffile %s: expected a regular file under /etc", f.Path)
		}
		byPath[f.Path] = f
	}
	for _, f := range in {
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			if p, ok := byPath[d]; ok && !p.Mode.IsDir() {
				return nil, fmt.Errorf("%s is inside %s, which is not a folder", f.Path, d)
			} else if !ok {
				byPath[d] = File{Path: d, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// tarGz writes files as ./-relative entries after "./".
func (p *Package) tarGz(files []File) ([]byte, error) {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // header: no name, no time
	tw := tar.NewWriter(gz)
	entries := append([]File{{Path: "", Mode: fs.ModeDir | 0o755}}, files...)
	for _, f := range entries {
		h := &tar.Header{Name: "." + f.Path, Mode: int64(f.Mode.Perm()), ModTime: p.MTime, Uname: "root", Gname: "root", Format: tar.FormatGNU}
		switch {
		case f.Mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.Mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
		case f.Mode.IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Body))
		default:
			return nil, fmt.Errorf("%s: mode %v is not a folder, file or symlink", f.Path, f.Mode)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Body); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// controlTar holds control, md5sums (every regular file but conffiles, as
// dh_md5sums writes it), conffiles and the maintainer scripts.
func (p *Package) controlTar(files []File) ([]byte, error) {
	var sums, conf strings.Builder
	var kib int64
	for _, f := range files {
		switch {
		case f.Mode.IsRegular():
			kib += (int64(len(f.Body)) + 1023) / 1024
			if f.Conffile {
				fmt.Fprintln(&conf, f.Path)
				continue
			}
			sum := md5.Sum(f.Body)
			fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), f.Path[1:])
		default:
			kib++ // dpkg-gencontrol counts a folder or link as 1 KiB
		}
	}
	entries := []File{{Path: "/control", Mode: 0o644, Body: p.Control.render(kib)}, {Path: "/md5sums", Mode: 0o644, Body: []byte(sums.String())}}
	if conf.Len() > 0 {
		entries = append(entries, File{Path: "/conffiles", Mode: 0o644, Body: []byte(conf.String())})
	}
	for _, name := range []string{"preinst", "postinst", "prerm", "postrm"} {
		if s, ok := p.Scripts[name]; ok {
			entries = append(entries, File{Path: "/" + name, Mode: 0o755, Body: s})
		}
	}
	for name := range p.Scripts {
		if !strings.Contains(" preinst postinst prerm postrm ", " "+name+" ") {
			return nil, fmt.Errorf("maintainer script %q: expected preinst, postinst, prerm or postrm", name)
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return p.tarGz(entries)
}
