package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// localRepo makes dir a flat apt repository of exactly the locked .debs,
// each taken from the pool (fetched and checked against the lock's sha256
// when absent): Packages by apt-ftparchive, and a Release naming the
// image's release as suite and codename, which mmdebstrap reads to find
// the essential packages. It returns the deb line for it: copy:// makes
// apt copy each .deb into the root's cache, where the chrooted dpkg finds
// it without a bind mount.
func localRepo(ctx context.Context, r runner, p *pool, l *Lock, dir, release string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, e := range l.Packages {
		src, err := p.get(ctx, e)
		if err != nil {
			return "", err
		}
		if err := linkOrCopy(src, filepath.Join(dir, debFileName(e))); err != nil {
			return "", err
		}
	}
	pk, err := r.output(ctx, dir, "apt-ftparchive", "packages", ".")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "Packages"), pk, 0o644); err != nil {
		return "", err
	}
	rel, err := r.output(ctx, dir, "apt-ftparchive", "-o", "APT::FTPArchive::Release::Suite="+release,
		"-o", "APT::FTPArchive::Release::Codename="+release, "release", ".")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "Release"), rel, 0o644); err != nil {
		return "", err
	}
	return "deb [trusted=yes] copy://" + dir + " ./", nil
}

// debFileName is the name apt gives a downloaded package (the epoch's
// colon written %3a).
func debFileName(e Locked) string {
	return strings.ReplaceAll(e.Name+"_"+e.Version+"_"+e.Arch+".deb", ":", "%3a")
}

// linkOrCopy hard-links src to dst, or copies it across file systems.
func linkOrCopy(src, dst string) error {
	os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}
