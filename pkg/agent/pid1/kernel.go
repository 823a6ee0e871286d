package pid1

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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
	f, err := os.Open(disk)
	if err != nil {
		return Installed{}, fmt.Errorf("opening %s: %w", disk, err)
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKRRPART, 0)
	f.Close()
	if errno != 0 {
		return Installed{}, fmt.Errorf("re-reading the partition table of %s: %w", disk, errno)
	}
	name := filepath.Base(disk)
	parts, _ := filepath.Glob(filepath.Join("/sys/class/block", name, name+"*"))
	sort.Strings(parts)
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return Installed{}, err
	}
	var tried []string
	for _, p := range parts {
		dev := "/dev/" + filepath.Base(p)
		// devtmpfs makes the node shortly after the partition scan.
		for i := 0; i < 40; i++ {
			if _, err := os.Stat(dev); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
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
func resolveIn(root, p string) string {
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
