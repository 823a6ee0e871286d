// Package pid1 is what the agent does as the init process of an initramfs:
// mount the kernel filesystems, make sure it has a console, load kernel
// modules in a given order, reap children, and leave the machine (reboot,
// power off, kexec). No udev, no busybox: only system calls.
package pid1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// Mount is one filesystem PID 1 mounts.
type Mount struct {
	Source, Target, FSType string
	Flags                  uintptr
	Data                   string
}

// Mounts are the filesystems the agent needs, in order. devtmpfs is mounted
// by hand: Debian's kernel has DEVTMPFS_MOUNT off.
var Mounts = []Mount{
	{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
	{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
}

// MountAll mounts Mounts; one already mounted (EBUSY) is fine.
func MountAll() error {
	var errs []error
	for _, m := range Mounts {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			errs = append(errs, fmt.Errorf("creating %s: %w", m.Target, err))
			continue
		}
		if err := unix.Mount(m.Source, m.Target, m.FSType, m.Flags, m.Data); err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mounting %s on %s: %w", m.FSType, m.Target, err))
		}
	}
	os.MkdirAll("/etc", 0o755)
	return errors.Join(errs...)
}

// EnsureConsole makes fds 0, 1 and 2 the console when the kernel could not
// open one for init (no /dev/console in the initramfs before devtmpfs).
func EnsureConsole() error {
	var st unix.Stat_t
	if unix.Fstat(1, &st) == nil {
		return nil
	}
	fd, err := unix.Open("/dev/console", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/console: %w", err)
	}
	for _, n := range []int{0, 1, 2} {
		unix.Dup3(fd, n, 0)
	}
	if fd > 2 {
		unix.Close(fd)
	}
	return nil
}

// ModuleList reads the initramfs's module list: one .ko path per line, in
// load order (dependencies first); blank lines and # comments are skipped.
func ModuleList(r io.Reader) []string {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// LoadModules loads every module of the list file in order. A module already
// loaded or built in (EEXIST) is fine; other failures are logged and
// returned together, the rest still loaded (a missing NIC driver shows later
// as "no interface with carrier").
func LoadModules(listPath string, log *slog.Logger) error {
	f, err := os.Open(listPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading module list: %w", err)
	}
	mods := ModuleList(f)
	f.Close()
	var errs []error
	for _, m := range mods {
		if err := LoadModule(m); err != nil {
			log.Warn("module not loaded", "module", m, "err", err)
			errs = append(errs, err)
			continue
		}
		log.Debug("module loaded", "module", m)
	}
	return errors.Join(errs...)
}

// moduleInitCompressedFile asks the kernel to decompress (kernel >= 5.17
// with CONFIG_MODULE_DECOMPRESS).
const moduleInitCompressedFile = 4

// LoadModule loads one .ko (or .ko.xz/.ko.zst/.ko.gz) with finit_module.
// Debian 12's modules are uncompressed. For a compressed module the kernel
// decompresses when it can; failing that, a .ko.zst is decompressed here and
// loaded with init_module.
func LoadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	compressed := strings.HasSuffix(path, ".xz") || strings.HasSuffix(path, ".zst") || strings.HasSuffix(path, ".gz")
	flags := 0
	if compressed {
		flags = moduleInitCompressedFile
	}
	err = unix.FinitModule(int(f.Fd()), "", flags)
	if err == nil || errors.Is(err, unix.EEXIST) {
		return nil
	}
	if compressed && strings.HasSuffix(path, ".zst") {
		data, derr := decompressZstd(f)
		if derr != nil {
			return fmt.Errorf("module %s: finit_module: %v; decompressing: %w", path, err, derr)
		}
		if err = unix.InitModule(data, ""); err == nil || errors.Is(err, unix.EEXIST) {
			return nil
		}
	}
	return fmt.Errorf("module %s: %w", filepath.Base(path), err)
}

func decompressZstd(f *os.File) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	d, err := zstd.NewReader(f)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var b bytes.Buffer
	_, err = io.Copy(&b, d)
	return b.Bytes(), err
}

// Reap collects exited children forever (PID 1 adopts orphans).
func Reap() {
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); errors.Is(err, unix.ECHILD) {
			return
		}
	}
}
