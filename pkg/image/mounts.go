package image

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// removeWork removes a build's work folder after detaching every mount
// below it: mmdebstrap mounts /proc, /sys and /dev into the root it builds
// (DKMS and nvcc need them), and a build killed mid-way can leave them
// there. Removing the folder must never descend into a mounted /dev.
func removeWork(dir string) error {
	if err := unmountUnder(dir); err != nil {
		return fmt.Errorf("not removing %s: %w", dir, err)
	}
	return os.RemoveAll(dir)
}

// unmountUnder detaches the mounts below dir, deepest first.
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil // no procfs: nothing this process could have mounted
	}
	mps := mountsUnder(string(b), abs)
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", mp, err)
		}
	}
	return nil
}

// mountsUnder lists the mount points in a mountinfo text that lie below dir.
func mountsUnder(mountinfo, dir string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if strings.HasPrefix(mp, strings.TrimSuffix(dir, "/")+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
