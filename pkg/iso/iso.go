// Package iso builds ingot's boot CDs: hybrid ISO 9660 images that boot a
// Linux kernel and initrd with a fixed command line, under BIOS through
// isolinux (El Torito, no emulation) and under UEFI through an El Torito
// EFI system image, a FAT file system holding a unified kernel image as
// EFI/BOOT/BOOTX64.EFI (the same UKI the image build makes, pkg/image).
// xorriso writes the image; nothing is mounted and no loop device is used,
// so it runs unprivileged and in CI. The same inputs give the same bytes.
//
// The image also carries an isohybrid MBR and GPT, so it can be written to a
// USB stick as is.
package iso

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/image"
)

// Files of Debian's isolinux and syslinux-common packages.
const (
	isolinuxBin = "/usr/lib/ISOLINUX/isolinux.bin"
	hybridMBR   = "/usr/lib/ISOLINUX/isohdpfx.bin"
	ldlinux     = "/usr/lib/syslinux/modules/bios/ldlinux.c32"
)

// DefaultEpoch is the time every file of the image carries when Spec.Epoch
// is 0: 1980-01-01, the earliest a FAT file system can hold.
const DefaultEpoch = 315532800

// maxCmdline is the x86 kernel's COMMAND_LINE_SIZE, less the initrd= and
// BOOT_IMAGE= words isolinux adds.
const maxCmdline = 1900

// Spec is what a boot CD boots.
type Spec struct {
	Kernel, Initrd string // files: a bzImage with an EFI stub, and its initrd
	Cmdline        string // the kernel command line, one line
	// Volume is the ISO 9660 volume ID: 1-32 of A-Z, 0-9 and _ (default
	// INGOT_AGENT).
	Volume string
	// Banner is one line isolinux says on the console before it loads the
	// kernel, so a console shows which CD booted; "" none. UEFI boots the
	// UKI directly and says nothing.
	Banner string
	// Epoch is the time of every file and of the volume (SOURCE_DATE_EPOCH
	// for xorriso, mkfs.vfat, mtools and the UKI); 0: DefaultEpoch.
	Epoch int64
	// Log receives each command run; nil discards.
	Log io.Writer
}

var volumeRE = regexp.MustCompile(`^[A-Z0-9_]{1,32}$`)

func (s *Spec) check() error {
	if s.Volume == "" {
		s.Volume = "INGOT_AGENT"
	}
	if s.Epoch == 0 {
		s.Epoch = DefaultEpoch
	}
	switch {
	case s.Kernel == "" || s.Initrd == "":
		return errors.New("iso: a kernel and an initrd are required")
	case !volumeRE.MatchString(s.Volume):
		return fmt.Errorf("iso: volume ID %q: expected 1-32 of A-Z, 0-9 and _", s.Volume)
	case strings.ContainsAny(s.Cmdline, "\r\n") || strings.ContainsAny(s.Banner, "\r\n"):
		return errors.New("iso: the kernel command line and the banner must be one line each")
	case len(s.Cmdline) > maxCmdline:
		return fmt.Errorf("iso: kernel command line of %d bytes: at most %d fit", len(s.Cmdline), maxCmdline)
	}
	return nil
}

// tool is a program or file Build needs and the Debian package holding it.
type tool struct{ name, pkg string }

var tools = []tool{
	{"xorriso", "xorriso"}, {isolinuxBin, "isolinux"}, {hybridMBR, "isolinux"}, {ldlinux, "syslinux-common"},
	{"objcopy", "binutils"}, {image.EFIStub, "systemd-boot-efi"}, {"mkfs.vfat", "dosfstools"},
	{"mcopy", "mtools"}, {"mmd", "mtools"},
}

// Check reports every program and file Build needs that is missing, with
// the Debian packages to install.
func Check() error {
	var missing, pkgs []string
	seen := map[string]bool{}
	for _, t := range tools {
		var err error
		if filepath.IsAbs(t.name) {
			_, err = os.Stat(t.name)
		} else {
			_, err = exec.LookPath(t.name)
		}
		if err != nil {
			missing = append(missing, t.name)
			if !seen[t.pkg] {
				seen[t.pkg] = true
				pkgs = append(pkgs, t.pkg)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("building a boot CD needs %s: apt-get install %s", strings.Join(missing, ", "), strings.Join(pkgs, " "))
}

// Build writes the boot CD of s to out (replacing it only once the new one
// is complete). Scratch files go to a folder beside out.
func Build(ctx context.Context, s Spec, out string) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := Check(); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(out), ".iso-work-")
	if err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	defer os.RemoveAll(work)
	stage := filepath.Join(work, "stage")
	if err := s.stage(ctx, work, stage); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	tmp := filepath.Join(work, "out.iso")
	if err := s.xorriso(ctx, stage, tmp); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	return nil
}

// stage lays out the CD's files:
//
//	isolinux/isolinux.bin, ldlinux.c32, isolinux.cfg   BIOS
//	boot/vmlinuz, boot/initrd.img                      what isolinux loads
//	boot/efi.img                                       UEFI: FAT with EFI/BOOT/BOOTX64.EFI (the UKI)
func (s Spec) stage(ctx context.Context, work, stage string) error {
	for src, dst := range map[string]string{
		isolinuxBin: "isolinux/isolinux.bin", ldlinux: "isolinux/ldlinux.c32",
		s.Kernel: "boot/vmlinuz", s.Initrd: "boot/initrd.img",
	} {
		if err := copyFile(src, filepath.Join(stage, dst)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(stage, "isolinux", "isolinux.cfg"), []byte(s.isolinuxCfg()), 0o644); err != nil {
		return err
	}
	uki := filepath.Join(work, "BOOTX64.EFI")
	osrel := []byte("NAME=\"ingot agent\"\nID=ingot-agent\nPRETTY_NAME=\"ingot agent (" + s.Volume + ")\"\n")
	if err := image.BuildUKI(ctx, image.UKI{Kernel: s.Kernel, Initrd: s.Initrd, Cmdline: s.Cmdline, OSRelease: osrel}, uki, s.Epoch); err != nil {
		return fmt.Errorf("building the UKI: %w", err)
	}
	b, err := os.ReadFile(uki)
	if err != nil {
		return err
	}
	// The FAT holds the UKI and its own overhead (tables, directories):
	// 1 MiB and 1/32 more, whole MiB.
	n := int64(len(b))
	size := (n + n/32 + 1<<20 + 1<<20 - 1) >> 20 << 20
	efi := filepath.Join(stage, "boot", "efi.img")
	if err := image.MakeFAT(ctx, efi, size, s.serial(), []image.ESPFile{{Path: "EFI/BOOT/BOOTX64.EFI", Data: b}}, s.Epoch); err != nil {
		return fmt.Errorf("building the EFI system image: %w", err)
	}
	return stampTree(stage, s.Epoch)
}

// isolinuxCfg boots the one entry at once. It writes to the screen only:
// the BIOS's console redirection carries that to the serial port (SOL on a
// server, SeaBIOS in the lab), and an isolinux SERIAL line besides would
// put every character there twice, interleaved.
func (s Spec) isolinuxCfg() string {
	var b strings.Builder
	if s.Banner != "" {
		fmt.Fprintf(&b, "SAY %s\n", s.Banner)
	}
	fmt.Fprintf(&b, "DEFAULT agent\nPROMPT 0\nTIMEOUT 0\nLABEL agent\n  LINUX /boot/vmlinuz\n  INITRD /boot/initrd.img\n  APPEND %s\n", s.Cmdline)
	return b.String()
}

// serial is the FAT volume serial: fixed by the volume ID, so rebuilds are
// identical.
func (s Spec) serial() string {
	var h uint32 = 2166136261 // FNV-1a
	for _, c := range []byte(s.Volume) {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("%08X", h)
}

// xorriso writes the hybrid image: isolinux as the BIOS El Torito entry,
// efi.img as the UEFI one, an isohybrid MBR and a GPT naming efi.img as
// the EFI system partition.
func (s Spec) xorriso(ctx context.Context, stage, out string) error {
	argv := []string{"xorriso", "-as", "mkisofs", "-o", out, "-V", s.Volume, "-r",
		"-isohybrid-mbr", hybridMBR,
		"-c", "isolinux/boot.cat",
		"-b", "isolinux/isolinux.bin", "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
		"-eltorito-alt-boot", "-e", "boot/efi.img", "-no-emul-boot", "-isohybrid-gpt-basdat",
		stage}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// SOURCE_DATE_EPOCH fixes the volume times and UUID; the files' own
	// times were set by stampTree.
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(s.Epoch, 10), "TZ=UTC", "LC_ALL=C")
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if s.Log != nil {
		fmt.Fprintf(s.Log, "+ %s\n", strings.Join(argv, " "))
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(outb.Bytes()))
	}
	return nil
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// stampTree sets the times of everything under root to epoch (children
// before their folders, whose times a child's creation changes).
func stampTree(root string, epoch int64) error {
	var paths []string
	if err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	}); err != nil {
		return err
	}
	t := time.Unix(epoch, 0)
	for i := len(paths) - 1; i >= 0; i-- {
		if err := os.Chtimes(paths[i], t, t); err != nil {
			return err
		}
	}
	return nil
}
