package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// GPT partition type GUIDs.
const (
	typeESP        = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
	typeRootX86_64 = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"
)

// gptMBR is syslinux's GPT-aware master boot record (package syslinux-common).
const gptMBR = "/usr/lib/syslinux/mbr/gptmbr.bin"

// IDs are the identifiers an image's bytes contain, derived from its name and
// version so that rebuilds are identical and distinct images differ.
type IDs struct {
	Disk, ESP, Root, RootFS string // UUIDs
	VFATSerial              string // 8 hex digits
}

// DeriveIDs returns the identifiers of image name at version.
func DeriveIDs(name, version string) IDs {
	u := func(purpose string) string {
		h := sha256.Sum256([]byte("ingot-image\x00" + name + "\x00" + version + "\x00" + purpose))
		h[6] = h[6]&0x0f | 0x40 // version 4 layout
		h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
		return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	}
	s := sha256.Sum256([]byte("ingot-image\x00" + name + "\x00" + version + "\x00vfat"))
	return IDs{Disk: u("disk"), ESP: u("esp"), Root: u("root"), RootFS: u("rootfs"), VFATSerial: fmt.Sprintf("%X", s[:4])}
}

// runner runs build commands with a fixed environment (SOURCE_DATE_EPOCH,
// TZ=UTC, LC_ALL=C) and keeps their output for error messages.
type runner struct {
	epoch int64
	log   io.Writer
}

func (r runner) env() []string {
	e := strconv.FormatInt(r.epoch, 10)
	return append(os.Environ(), "SOURCE_DATE_EPOCH="+e, "E2FSPROGS_FAKE_TIME="+e, "TZ=UTC", "LC_ALL=C")
}

func (r runner) run(ctx context.Context, stdin []byte, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = r.env()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if r.log != nil {
		fmt.Fprintf(r.log, "+ %s\n", strings.Join(argv, " "))
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", truncate(strings.Join(argv, " "), 300), err, lastBytes(out.Bytes(), 4000))
	}
	return nil
}

// output runs argv in dir with the runner's environment and returns its
// standard output.
func (r runner) output(ctx context.Context, dir string, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = r.env(), dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if r.log != nil {
		fmt.Fprintf(r.log, "+ %s\n", strings.Join(argv, " "))
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", truncate(strings.Join(argv, " "), 300), err, lastBytes(stderr.Bytes(), 4000))
	}
	return out, nil
}

// ESPFile is one file of the EFI system partition.
type ESPFile struct {
	Path string // e.g. EFI/BOOT/BOOTX64.EFI
	Data []byte
}

// makeESP creates a FAT file system image of size bytes at img holding
// files, plus syslinux (BIOS boot) when syslinuxCfg is not empty. It uses
// mkfs.vfat --invariant and mtools only: no mounts.
func (r runner) makeESP(ctx context.Context, img string, size int64, serial string, files []ESPFile, syslinuxCfg string) error {
	if err := truncateNew(img, size); err != nil {
		return err
	}
	// --invariant must come before -i: the other order resets the serial.
	if err := r.run(ctx, nil, "mkfs.vfat", "--invariant", "-i", serial, "-n", "ESP", img); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(filepath.Dir(img), "esp-stage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(f.Path); d != "." && d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range sortedKeys(dirs) {
		if err := r.run(ctx, nil, "mmd", "-i", img, "::/"+d); err != nil {
			return err
		}
	}
	if syslinuxCfg != "" {
		// Installs ldlinux.sys (with its sector map) and ldlinux.c32 via mtools.
		if err := r.run(ctx, nil, "syslinux", "--install", img); err != nil {
			return fmt.Errorf("installing syslinux (apt-get install syslinux syslinux-common): %w", err)
		}
		files = append(files, ESPFile{Path: "syslinux.cfg", Data: []byte(syslinuxCfg)})
	}
	for i, f := range files {
		src := filepath.Join(stage, strconv.Itoa(i))
		if err := writeStamped(src, f.Data, 0o644, r.epoch); err != nil {
			return err
		}
		if err := r.run(ctx, nil, "mcopy", "-m", "-o", "-i", img, src, "::/"+f.Path); err != nil {
			return err
		}
	}
	return nil
}

// makeRootFS creates an ext4 image of size bytes at img from the folder
// root with fixed UUID, hash seed and times: mkfs.ext4 -d, then debugfs
// resets every inode's times to the epoch (mkfs copies the host's ctime).
func (r runner) makeRootFS(ctx context.Context, img, root string, size int64, uuid string) error {
	if err := stampTree(root, r.epoch); err != nil {
		return err
	}
	if err := truncateNew(img, size); err != nil {
		return err
	}
	if err := r.run(ctx, nil, "mkfs.ext4", "-q", "-F", "-L", "root", "-U", uuid,
		"-E", "hash_seed="+uuid+",root_owner=0:0,nodiscard", "-d", root, img); err != nil {
		return err
	}
	var cmds bytes.Buffer
	t := time.Unix(r.epoch, 0).UTC().Format("20060102150405")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		name := "/" + filepath.ToSlash(rel)
		if rel == "." {
			name = "/"
		}
		if strings.ContainsAny(name, "\"\n") {
			return fmt.Errorf("root file %q: names with quotes or newlines are not supported", name)
		}
		for _, f := range []string{"atime", "ctime", "mtime", "crtime"} {
			fmt.Fprintf(&cmds, "sif \"%s\" %s %s\n", name, f, t)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing root %s: %w", root, err)
	}
	for _, f := range []string{"atime", "ctime", "mtime", "crtime"} {
		fmt.Fprintf(&cmds, "sif /lost+found %s %s\n", f, t)
	}
	return r.run(ctx, cmds.Bytes(), "debugfs", "-w", "-f", "-", img)
}

// assembleDisk writes a GPT disk of 1 MiB + ESP + root + 1 MiB at out, with
// esp and root copied in at their offsets (like dd conv=notrunc) and, for
// BIOS boot, syslinux's GPT MBR with the ESP marked legacy-bootable.
func (r runner) assembleDisk(ctx context.Context, out string, ids IDs, l Layout, esp, root string, bios bool) error {
	const mib = 1 << 20
	if err := truncateNew(out, mib+l.ESP+l.Root+mib); err != nil {
		return err
	}
	attrs := ""
	if bios {
		attrs = `, attrs="LegacyBIOSBootable"`
	}
	script := fmt.Sprintf("label: gpt\nlabel-id: %s\nunit: sectors\nfirst-lba: 2048\n"+
		"start=2048, size=%d, type=%s, uuid=%s, name=\"esp\"%s\n"+
		"start=%d, size=%d, type=%s, uuid=%s, name=\"root\"\n",
		ids.Disk, l.ESP/512, typeESP, ids.ESP, attrs, (mib+l.ESP)/512, l.Root/512, typeRootX86_64, ids.Root)
	if err := r.run(ctx, []byte(script), "sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", out); err != nil {
		return err
	}
	if bios {
		mbr, err := os.ReadFile(gptMBR)
		if err != nil {
			return fmt.Errorf("reading syslinux's GPT MBR (apt-get install syslinux-common): %w", err)
		}
		if len(mbr) > 440 {
			mbr = mbr[:440]
		}
		if err := copyAt(out, bytes.NewReader(mbr), 0); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		path string
		off  int64
	}{{esp, mib}, {root, mib + l.ESP}} {
		f, err := os.Open(p.path)
		if err != nil {
			return err
		}
		err = copyAt(out, f, p.off)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// copyAt writes r into file at offset off without truncating it, skipping
// all-zero blocks so the file stays sparse (it was just created empty).
func copyAt(file string, r io.Reader, off int64) error {
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if !allZero(buf[:n]) {
				if _, err := f.WriteAt(buf[:n], off); err != nil {
					f.Close()
					return fmt.Errorf("writing %s at %d: %w", file, off, err)
				}
			}
			off += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			f.Close()
			return rerr
		}
	}
	return f.Close()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func truncateNew(p string, size int64) error {
	os.Remove(p)
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeStamped writes a file with mode perm and both times set to epoch.
func writeStamped(p string, data []byte, perm os.FileMode, epoch int64) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(p, perm); err != nil {
		return err
	}
	t := time.Unix(epoch, 0)
	return os.Chtimes(p, t, t)
}

// stampTree sets the atime and mtime of everything under root to epoch,
// symlinks included (children before parents).
func stampTree(root string, epoch int64) error {
	var paths []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(epoch * 1e9), unix.NsecToTimespec(epoch * 1e9)}
	for i := len(paths) - 1; i >= 0; i-- {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("setting times of %s: %w", paths[i], err)
		}
	}
	return nil
}
