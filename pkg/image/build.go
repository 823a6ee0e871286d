package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/ingot-dev/ingot/pkg/initramfs"
)

// CachePool is the pool that lives beside a cache folder (CACHE/pool):
// the lab, its tests and `make test-e2e-long` share one, so each locked
// .deb is fetched once per machine.
func CachePool(cache string) string { return filepath.Join(cache, "pool") }

// Options are the build's environment, not part of the image definition.
type Options struct {
	// Out is the output folder: NAME.raw, NAME.raw.zst, NAME.json.
	Out string
	// Cache holds the kernel package (see initramfs.CacheDir).
	Cache string
	// Pool is the content store (pkg/artifact) that keeps the locked
	// .debs, tarballs and pinned files, so a build after the mirror
	// dropped a version still finds them.
	Pool string
	// ModuleKey and ModuleCert are the site's module signing key (PEM) and
	// certificate (PEM or DER): DKMS signs the modules it builds with them
	// during the build; they never enter the image. Empty: the modules stay
	// unsigned and the image needs Secure Boot off.
	ModuleKey, ModuleCert string
	// SourcesDir is the apt configuration the mirrors come from
	// (default /etc/apt).
	SourcesDir string
	// Log receives the commands run; nil is silent.
	Log io.Writer
	// KeepWork leaves the work folder (OUT/.NAME.work: the root, the local
	// repository, the partition images) after the build, to compare two
	// builds file by file.
	KeepWork bool
}

// Result is what a build produced; it is also written to NAME.json.
type Result struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Raw       string `json:"raw"`
	RawSHA256 string `json:"raw_sha256"`
	RawSize   int64  `json:"raw_size"`
	Zst       string `json:"zst"`
	ZstSHA256 string `json:"zst_sha256"`
	ZstSize   int64  `json:"zst_size"`
	Kernel    string `json:"kernel,omitempty"`
	IDs       IDs    `json:"ids"`
}

// bootPieces is what the ESP and root partition are made from.
type bootPieces struct {
	esp  []ESPFile
	root string // folder
	sys  string // syslinux.cfg ("" for UEFI only)
	kver string
	stub string // the EFI stub, from the lock's systemd-boot-efi
}

// Build builds s into o.Out and returns the sha256s to pin.
func Build(ctx context.Context, s *Spec, o Options) (*Result, error) {
	if o.Out == "" {
		return nil, fmt.Errorf("building image %s: no output folder", s.Name)
	}
	l, err := s.Layout()
	if err != nil {
		return nil, err
	}
	work := filepath.Join(o.Out, "."+s.Name+".work")
	if err := removeWork(work); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	if !o.KeepWork {
		defer removeWork(work)
	}
	r := runner{epoch: s.Epoch(), log: o.Log}
	in, err := s.lockedInputs(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("building image %s: %w", s.Name, err)
	}
	ids := DeriveIDs(s.Name, s.Version)
	var p *bootPieces
	switch s.Base.Kind {
	case "pieces":
		p, err = buildPieces(ctx, r, s, o, in, ids, work)
	case "debian":
		p, err = buildDebian(ctx, r, s, o, in, ids, work)
	default:
		err = fmt.Errorf("base.kind %q: expected debian or pieces", s.Base.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("building image %s: %w", s.Name, err)
	}
	esp, rootImg := filepath.Join(work, "esp.img"), filepath.Join(work, "root.img")
	if err := r.makeESP(ctx, esp, l.ESP, ids.VFATSerial, p.esp, p.sys); err != nil {
		return nil, fmt.Errorf("building image %s ESP: %w", s.Name, err)
	}
	if err := r.makeRootFS(ctx, rootImg, p.root, l.Root, ids.RootFS); err != nil {
		return nil, fmt.Errorf("building image %s root: %w", s.Name, err)
	}
	res := &Result{Name: s.Name, Version: s.Version, Kernel: p.kver, IDs: ids,
		Raw: filepath.Join(o.Out, s.Name+".raw"), Zst: filepath.Join(o.Out, s.Name+".raw.zst")}
	if err := r.assembleDisk(ctx, res.Raw, ids, l, esp, rootImg, p.sys != ""); err != nil {
		return nil, fmt.Errorf("building image %s disk: %w", s.Name, err)
	}
	if err := compressFile(res.Raw, res.Zst, s.Build.ZstdLevel); err != nil {
		return nil, err
	}
	if res.RawSHA256, res.RawSize, err = hashFile(res.Raw); err != nil {
		return nil, err
	}
	if res.ZstSHA256, res.ZstSize, err = hashFile(res.Zst); err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	return res, os.WriteFile(filepath.Join(o.Out, s.Name+".json"), append(b, '\n'), 0o644)
}

// buildPieces makes the lab-style image: the Debian kernel package's
// kernel and an initramfs holding the image's files (busybox and an init
// script) plus the boot modules; the root partition holds its identity and
// the root programs with their libraries.
func buildPieces(ctx context.Context, r runner, s *Spec, o Options, in *inputs, ids IDs, work string) (*bootPieces, error) {
	k, err := in.kernel(ctx, s, o.Cache)
	if err != nil {
		return nil, err
	}
	var files []initramfs.File
	for _, f := range s.Files {
		b, err := f.Read(s.Dir)
		if err != nil {
			return nil, err
		}
		perm, _ := f.Perm()
		files = append(files, initramfs.File{Path: f.Path, Perm: perm, Data: b})
	}
	initrd := filepath.Join(work, "initrd.img")
	out, err := os.Create(initrd)
	if err != nil {
		return nil, err
	}
	_, err = initramfs.Build(ctx, initramfs.Spec{KernelPkgDir: k.Root, KernelVersion: k.Version,
		Modules: s.Boot.Modules, Files: files, MTime: s.Epoch(), Compression: initramfs.Gzip}, out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("building the initramfs: %w", err)
	}
	stub, err := in.stub(ctx, s, o.Cache)
	if err != nil {
		return nil, err
	}
	p := &bootPieces{root: filepath.Join(work, "root"), kver: k.Version, stub: stub}
	if err := writeIdentity(p.root, s, r.epoch); err != nil {
		return nil, err
	}
	if err := addPrograms(p.root, s.RootPrograms, r.epoch); err != nil {
		return nil, err
	}
	osrel, _ := os.ReadFile(filepath.Join(p.root, "etc", "os-release"))
	return p, p.addBoot(ctx, r, s, k.Vmlinuz, initrd, s.Boot.Cmdline, osrel, work)
}

// addBoot puts a UKI (UEFI) and, when asked, kernel + initrd + syslinux.cfg
// (BIOS) into the ESP.
func (p *bootPieces) addBoot(ctx context.Context, r runner, s *Spec, kernel, initrd, cmdline string, osrel []byte, work string) error {
	name := s.RemovableBootFile()
	uki := filepath.Join(work, name)
	if err := r.makeUKI(ctx, UKI{Kernel: kernel, Initrd: initrd, Cmdline: cmdline, OSRelease: osrel, Arch: s.Arch, Stub: p.stub}, uki); err != nil {
		return fmt.Errorf("building the UKI: %w", err)
	}
	b, err := os.ReadFile(uki)
	if err != nil {
		return err
	}
	p.esp = append(p.esp, ESPFile{Path: "EFI/BOOT/" + name, Data: b})
	if s.Boot.BIOS == "syslinux" {
		kb, err := os.ReadFile(kernel)
		if err != nil {
			return err
		}
		ib, err := os.ReadFile(initrd)
		if err != nil {
			return err
		}
		p.esp = append(p.esp, ESPFile{Path: "vmlinuz", Data: kb}, ESPFile{Path: "initrd.img", Data: ib})
		p.sys = fmt.Sprintf("DEFAULT ingot\nPROMPT 0\nTIMEOUT 0\nLABEL ingot\n  LINUX /vmlinuz\n  INITRD /initrd.img\n  APPEND %s\n", cmdline)
	}
	return nil
}

// writeIdentity writes /etc/os-release (from the image's files, if given)
// and /etc/ingot/image.json into root.
func writeIdentity(root string, s *Spec, epoch int64) error {
	osrel := []byte(fmt.Sprintf("PRETTY_NAME=\"ingot %s %s\"\nID=ingot-%s\nVERSION_ID=%s\n", s.Name, s.Version, s.Name, s.Version))
	for _, f := range s.Files {
		if f.Path == "/etc/os-release" {
			b, err := f.Read(s.Dir)
			if err != nil {
				return err
			}
			osrel = b
		}
	}
	id, _ := json.Marshal(map[string]string{"name": s.Name, "version": s.Version})
	if err := writeStamped(filepath.Join(root, "etc", "os-release"), osrel, 0o644, epoch); err != nil {
		return err
	}
	return writeStamped(filepath.Join(root, "etc", "ingot", "image.json"), append(id, '\n'), 0o644, epoch)
}

// frameSize is how much raw image each zstd frame holds. Every frame
// declares its content size, so the agent can decode frames on all cores
// (1.6x the speed of one single-frame stream here); any zstd tool still reads
// the concatenation as one stream.
const frameSize = 32 << 20

// compressFile writes zstd(src) to dst as frames of frameSize raw bytes:
// klauspost/compress, one goroutine, fixed level, so the output is the same
// on every machine.
func compressFile(src, dst string, level int) error {
	if level == 0 {
		level = 3
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(dst + ".tmp")
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)))
	if err != nil {
		out.Close()
		return err
	}
	buf := make([]byte, frameSize)
	var frame []byte
	for err == nil {
		var n int
		n, err = io.ReadFull(in, buf)
		if n > 0 {
			frame = enc.EncodeAll(buf[:n], frame[:0])
			if _, werr := out.Write(frame); werr != nil {
				err = werr
				break
			}
		}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("compressing %s: %w", src, err)
	}
	return os.Rename(dst+".tmp", dst)
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hashing %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// BuildCached builds s into o.Cache/images/NAME-<digest of its inputs>
// unless a finished build of the same inputs is there, and returns it. The
// e2e tests share one lab image this way. o.Out is ignored.
func BuildCached(ctx context.Context, s *Spec, o Options) (*Result, error) {
	key, err := InputsKey(ctx, s, o)
	if err != nil {
		return nil, err
	}
	o.Out = filepath.Join(o.Cache, "images", s.Name+"-"+key[:16])
	if b, err := os.ReadFile(filepath.Join(o.Out, s.Name+".json")); err == nil {
		var res Result
		if json.Unmarshal(b, &res) == nil {
			if sum, _, err := hashFile(res.Zst); err == nil && sum == res.ZstSHA256 {
				return &res, nil
			}
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	return Build(ctx, s, o)
}

// builderVersion changes whenever the builder's output for the same inputs
// changes, so BuildCached never serves an image an older builder made.
const builderVersion = "4" // 3: sized 32 MiB zstd frames; 4: locked inputs

// InputsKey digests everything a build reads: the definition, its lock
// (every .deb, the kernel package included), its files (host files
// included) and root programs. It reads no network.
func InputsKey(ctx context.Context, s *Spec, o Options) (string, error) {
	h := sha256.New()
	def, err := os.ReadFile(filepath.Join(s.Dir, FileName))
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(s.Dir, LockFile))
	if err != nil {
		return "", fmt.Errorf("image %s: %w (every image is locked: ingot image lock %s)", s.Name, err, s.Dir)
	}
	fmt.Fprintf(h, "ingot-image-%s\n%x\n%x\n", builderVersion, sha256.Sum256(def), sha256.Sum256(lock))
	for _, f := range s.Files {
		if _, _, ok := f.debSource(); ok || f.SHA256 != "" {
			fmt.Fprintf(h, "%s %s %s\n", f.Path, f.Source, f.SHA256) // the lock or the pin names the bytes
			continue
		}
		b, err := f.Read(s.Dir)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %x\n", f.Path, sha256.Sum256(b))
	}
	for _, st := range s.BuildSteps {
		if st.Script != "" {
			b, err := os.ReadFile(filepath.Join(s.Dir, st.Script))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "step %s %x\n", st.Name, sha256.Sum256(b))
		}
	}
	for _, prog := range s.RootPrograms {
		files, err := ProgramFiles(prog)
		if err != nil {
			return "", err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "program %s %s %x\n", prog, f, sha256.Sum256(b))
		}
	}
	fmt.Fprintf(h, "module-cert %s\n", digestFile(o.ModuleCert)) // the modules are signed by it
	return hex.EncodeToString(h.Sum(nil)), nil
}
