package pid1

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// Installed is a kernel found on the written disk, for kexec.
type Installed struct {
	Kernel, Initrd string // paths under the mount point
	Root           string // the partition holding them, e.g. /dev/vda2
	Mount          string // where it is mounted (read-only)
}

// FindInstalledKernel looks for the installed OS's kernel on disk (e.g.
// /dev/vda) after the image was written: re-read the partition table, mount
// each partition read-only in turn (ext4, xfs, btrfs, vfat: whichever the
// initramfs has drivers for) and look for /boot/vmlinuz (or /vmlinuz) and the
// matching initrd. Best effort: an error means "reboot instead".
func FindInstalledKernel(disk, mnt string) (Installed, error) {
	parts, err := partitions(disk)
	if err != nil {
		return Installed{}, err
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return Installed{}, err
	}
	var tried []string
	for _, dev := range parts {
		var why []string
		for _, fs := range []string{"ext4", "xfs", "btrfs", "vfat"} {
			if err := unix.Mount(dev, mnt, fs, unix.MS_RDONLY, ""); err != nil {
				why = append(why, fs+": "+err.Error())
				continue
			}
			if k, i, ok := FindKernelIn(mnt); ok {
				return Installed{Kernel: k, Initrd: i, Root: dev, Mount: mnt}, nil
			}
			unix.Unmount(mnt, 0)
			why = append(why, fs+": no kernel")
			break
		}
		tried = append(tried, dev+" ("+strings.Join(why, ", ")+")")
	}
	return Installed{}, fmt.Errorf("no kernel found on %s (partitions %v; are the filesystem modules in the initramfs?)", disk, tried)
}

// FindKernelIn looks under root for the kernel and initrd: Debian's
// /vmlinuz and /initrd.img links (or their /boot ones), else the newest
// /boot/vmlinuz-VERSION with /boot/initrd.img-VERSION.
func FindKernelIn(root string) (kernel, initrd string, ok bool) {
	for _, d := range []string{"", "boot"} {
		if k := resolveIn(root, filepath.Join(root, d, "vmlinuz")); k != "" {
			return k, resolveIn(root, filepath.Join(root, d, "initrd.img")), true
		}
	}
	ks, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(ks) == 0 {
		return "", "", false
	}
	sort.Strings(ks) // good enough to pick the newest of one Debian series
	k := ks[len(ks)-1]
	i := filepath.Join(root, "boot", "initrd.img-"+strings.TrimPrefix(filepath.Base(k), "vmlinuz-"))
	if _, err := os.Stat(i); err != nil {
		i = ""
	}
	return k, i, true
}

// resolveIn follows the link p (one level, as Debian makes them) with
// absolute targets taken inside root; "" when p or its target is missing.
// A regular file p is itself (an ESP holds vmlinuz and initrd.img as
// files: vfat has no links).
func resolveIn(root, p string) string {
	if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	l, err := os.Readlink(p)
	if err != nil {
		return ""
	}
	if filepath.IsAbs(l) {
		l = filepath.Join(root, l)
	} else {
		l = filepath.Join(filepath.Dir(p), l)
	}
	if st, err := os.Stat(l); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return l
}

// InstallFile writes data to path (absolute, e.g. /etc/ingot/firstboot.env)
// inside the installed OS on disk after the image was written: it mounts
// each partition read-write in turn (ext4, xfs, btrfs, vfat) at mnt until
// one holds the OS's root (etc/os-release or usr/lib/os-release, or, for an
// OS that runs from its initramfs, a partition labelled by the image with an
// etc/ directory), writes the file with mode, syncs and unmounts.
func InstallFile(disk, mnt, path string, data []byte, mode os.FileMode) error {
	parts, err := partitions(disk)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	var tried []string
	for _, dev := range parts {
		mounted := ""
		for _, fs := range []string{"ext4", "xfs", "btrfs", "vfat"} {
			if err := unix.Mount(dev, mnt, fs, 0, ""); err == nil {
				mounted = fs
				break
			}
		}
		if mounted == "" {
			tried = append(tried, dev+" (no filesystem the agent can mount)")
			continue
		}
		if !isRoot(mnt) {
			unix.Unmount(mnt, 0)
			tried = append(tried, dev+" ("+mounted+", not the root: no etc/os-release)")
			continue
		}
		err := writeSynced(filepath.Join(mnt, path), data, mode)
		if uerr := unix.Unmount(mnt, 0); err == nil && uerr != nil {
			err = fmt.Errorf("unmounting %s: %w", dev, uerr)
		}
		if err != nil {
			return fmt.Errorf("writing %s on %s: %w", path, dev, err)
		}
		return nil
	}
	return fmt.Errorf("no root filesystem of the installed OS on %s (partitions %v)", disk, tried)
}

func isRoot(dir string) bool {
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return true
		}
	}
	return false
}

// writeSynced writes data to p (its folder made 0755) with mode through a
// temporary file renamed over it, file and folder synced: a reboot or a
// power cut right after leaves the old file or the new one whole.
func writeSynced(p string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return durable.WriteFile(p, data, mode)
}

// partitions re-reads disk's partition table and returns its partition
// device nodes in order, waiting briefly for devtmpfs to make them.
func partitions(disk string) ([]string, error) {
	f, err := os.Open(disk)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", disk, err)
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKRRPART, 0)
	f.Close()
	if errno != 0 {
		return nil, fmt.Errorf("re-reading the partition table of %s: %w", disk, errno)
	}
	name := filepath.Base(disk)
	sys, _ := filepath.Glob(filepath.Join("/sys/class/block", name, name+"*"))
	sort.Strings(sys)
	var out []string
	for _, p := range sys {
		dev := "/dev/" + filepath.Base(p)
		for i := 0; i < 40; i++ {
			if _, err := os.Stat(dev); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		out = append(out, dev)
	}
	return out, nil
}
