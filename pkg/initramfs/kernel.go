package initramfs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// CacheDir is where downloaded kernel packages, their unpacked trees and
// built initramfs live: $INGOT_CACHE, else $XDG_CACHE_HOME/ingot, else
// /var/cache/ingot. getenv is os.Getenv outside tests.
func CacheDir(getenv func(string) string) string {
	if d := getenv("INGOT_CACHE"); d != "" {
		return d
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "ingot")
	}
	return "/var/cache/ingot"
}

// Kernel is an unpacked Debian linux-image package.
type Kernel struct {
	// Deb is the package file it came from ("" for a given folder).
	Deb string `json:"deb,omitempty"`
	// DebSHA256 is the package file's digest.
	DebSHA256 string `json:"deb_sha256,omitempty"`
	// Root is the dpkg -x folder: boot/ and lib/modules/ below it.
	Root string `json:"root"`
	// Version is the kernel release (the lib/modules folder name).
	Version string `json:"version"`
	// Vmlinuz is Root/boot/vmlinuz-Version.
	Vmlinuz string `json:"vmlinuz"`
}

// KernelPackage names the package linux-image-amd64 currently depends on
// (e.g. linux-image-6.1.0-57-amd64), parsed from `apt-cache depends`.
func KernelPackage(ctx context.Context) (string, error) { return KernelPackageFor(ctx, "") }

// KernelPackageFor is KernelPackage for a Debian architecture: "" or
// "amd64" the host's linux-image-amd64, "arm64" linux-image-arm64:arm64
// (dpkg --add-architecture arm64 and apt-get update first), whose
// dependency comes back qualified (linux-image-6.1.0-57-arm64:arm64).
func KernelPackageFor(ctx context.Context, arch string) (string, error) {
	meta := "linux-image-amd64"
	if arch != "" && arch != "amd64" {
		meta = "linux-image-" + arch + ":" + arch
	}
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", meta).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache depends %s: %w%s", meta, err, archHint(arch))
	}
	return parseKernelDepends(out)
}

// archHint says how to make a foreign architecture's packages known.
func archHint(arch string) string {
	if arch == "" || arch == "amd64" {
		return ""
	}
	return fmt.Sprintf(" (is the %s architecture known to apt? dpkg --add-architecture %s && apt-get update, or 'make deps')", arch, arch)
}

// parseKernelDepends finds "Depends: linux-image-X" in apt-cache output.
func parseKernelDepends(out []byte) (string, error) {
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), ":")
		v = strings.TrimSpace(v)
		if ok && k == "Depends" && strings.HasPrefix(v, "linux-image-") {
			return v, nil
		}
	}
	return "", fmt.Errorf("apt-cache depends linux-image-amd64: no \"Depends: linux-image-...\" line in %q", out)
}

// FetchKernel returns an unpacked kernel package. spec is "auto" (download
// the package linux-image-amd64 points at with apt-get download, once, into
// cache/debs), a .deb file, or an already unpacked folder. Packages are
// unpacked once into cache/kernel/<sha256 prefix>/root.
func FetchKernel(ctx context.Context, cache, spec string) (*Kernel, error) {
	return FetchKernelFor(ctx, cache, spec, "")
}

// FetchKernelFor is FetchKernel for a Debian architecture ("" or "amd64",
// "arm64"): "auto" downloads the package linux-image-ARCH:ARCH points at.
// Debian's arm64 vmlinuz is an uncompressed Image with its EFI stub, which
// systemd's stub and the firmware load as is.
func FetchKernelFor(ctx context.Context, cache, spec, arch string) (*Kernel, error) {
	deb := spec
	if spec == "auto" {
		pkg, err := KernelPackageFor(ctx, arch)
		if err != nil {
			return nil, err
		}
		if deb, err = download(ctx, filepath.Join(cache, "debs"), pkg); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(deb)
	if err != nil {
		return nil, fmt.Errorf("kernel package %s: %w", deb, err)
	}
	if st.IsDir() {
		return describeKernel(&Kernel{Root: deb})
	}
	sum, err := fileSHA256(deb)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cache, "kernel", sum[:16], "root")
	if _, err := os.Stat(filepath.Join(root, ".complete")); err != nil {
		if err := unpack(ctx, deb, root); err != nil {
			return nil, err
		}
	}
	return describeKernel(&Kernel{Deb: deb, DebSHA256: sum, Root: root})
}

// FetchPackage downloads a Debian package (apt-get download, once, into
// cache/debs) and unpacks it once into cache/deb/<sha256 prefix>/root,
// whose path it returns. pkg may name an architecture (busybox-static:arm64)
// for a file of another machine's system, without installing anything.
func FetchPackage(ctx context.Context, cache, pkg string) (string, error) {
	deb, err := download(ctx, filepath.Join(cache, "debs"), pkg)
	if err != nil {
		return "", err
	}
	return UnpackPackage(ctx, cache, deb)
}

// UnpackPackage unpacks a .deb file once into cache/deb/<sha256
// prefix>/root and returns that folder.
func UnpackPackage(ctx context.Context, cache, deb string) (string, error) {
	sum, err := fileSHA256(deb)
	if err != nil {
		return "", err
	}
	root := filepath.Join(cache, "deb", sum[:16], "root")
	if _, err := os.Stat(filepath.Join(root, ".complete")); err != nil {
		if err := unpack(ctx, deb, root); err != nil {
			return "", err
		}
	}
	return root, nil
}

// download fetches pkg's .deb into dir unless a copy is there already. pkg
// may carry an architecture (name:arch): apt names the file name_VERSION_arch.deb.
func download(ctx context.Context, dir, pkg string) (string, error) {
	name, arch, _ := strings.Cut(pkg, ":")
	pattern := filepath.Join(dir, name+"_*.deb")
	if arch != "" {
		pattern = filepath.Join(dir, name+"_*_"+arch+".deb")
	}
	if m := globSorted(pattern); len(m) > 0 {
		return m[len(m)-1], nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "apt-get", "download", pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w: %s%s", pkg, err, out, archHint(arch))
	}
	m := globSorted(pattern)
	if len(m) == 0 {
		return "", fmt.Errorf("apt-get download %s: no %s appeared in %s", pkg, filepath.Base(pattern), dir)
	}
	return m[len(m)-1], nil
}

// unpack runs dpkg -x into a temporary folder and renames it into place.
func unpack(ctx context.Context, deb, root string) error {
	tmp := root + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "dpkg", "-x", deb, tmp).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg -x %s: %w: %s", deb, err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return err
	}
	os.RemoveAll(root)
	return os.Rename(tmp, root)
}

// describeKernel fills Version and Vmlinuz from k.Root.
func describeKernel(k *Kernel) (*Kernel, error) {
	m := globSorted(filepath.Join(k.Root, "boot", "vmlinuz-*"))
	if len(m) != 1 {
		return nil, fmt.Errorf("kernel package %s: found %d boot/vmlinuz-* files, expected 1", k.Root, len(m))
	}
	k.Vmlinuz = m[0]
	k.Version = strings.TrimPrefix(filepath.Base(m[0]), "vmlinuz-")
	if _, err := os.Stat(filepath.Join(k.Root, "lib", "modules", k.Version)); err != nil {
		return nil, fmt.Errorf("kernel package %s: %w (expected its modules)", k.Root, err)
	}
	return k, nil
}

func globSorted(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	sort.Strings(m)
	return m
}

// fileSHA256 returns the hex sha256 of a file.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Output is what BuildKernelAndInitrd leaves in its folder.
type Output struct {
	Dir           string  `json:"dir"`
	Vmlinuz       string  `json:"vmlinuz"`
	VmlinuzSHA256 string  `json:"vmlinuz_sha256"`
	Initrd        string  `json:"initrd"`
	InitrdSHA256  string  `json:"initrd_sha256"`
	Kernel        *Kernel `json:"kernel"`
	Result        *Result `json:"initramfs"`
}

// BuildKernelAndInitrd writes dir/vmlinuz (copied from the package) and
// dir/initrd.img (built from s with k's modules). When dir already holds a
// build of the same inputs (dir/inputs.sha256) it is reused.
func BuildKernelAndInitrd(ctx context.Context, k *Kernel, s Spec, dir string) (*Output, error) {
	s.KernelPkgDir, s.KernelVersion = k.Root, k.Version
	key, err := inputsKey(k, s)
	if err != nil {
		return nil, err
	}
	out := &Output{Dir: dir, Vmlinuz: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img"), Kernel: k}
	if old, err := os.ReadFile(filepath.Join(dir, "inputs.sha256")); err == nil && string(old) == key {
		if b, err := os.ReadFile(filepath.Join(dir, "result.json")); err == nil {
			json.Unmarshal(b, &out.Result)
		}
		return out, out.fillSums()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	os.Remove(filepath.Join(dir, "inputs.sha256"))
	if err := copyFile(k.Vmlinuz, out.Vmlinuz); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if out.Result, err = Build(ctx, s, &b); err != nil {
		return nil, err
	}
	if err := writeAtomic(out.Initrd, b.Bytes()); err != nil {
		return nil, err
	}
	b.Reset()
	json.NewEncoder(&b).Encode(out.Result)
	if err := writeAtomic(filepath.Join(dir, "result.json"), b.Bytes()); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "inputs.sha256"), []byte(key), 0o644); err != nil {
		return nil, err
	}
	return out, out.fillSums()
}

func (o *Output) fillSums() (err error) {
	if o.VmlinuzSHA256, err = fileSHA256(o.Vmlinuz); err != nil {
		return err
	}
	o.InitrdSHA256, err = fileSHA256(o.Initrd)
	return err
}

// InputsKey is a digest of everything a kernel + initramfs build depends on
// (the v number changes whenever the output of the same inputs changes);
// e2e tests use it to share one build (cache/initramfs/<key>).
func InputsKey(k *Kernel, s Spec) (string, error) {
	s.KernelPkgDir, s.KernelVersion = k.Root, k.Version
	return inputsKey(k, s)
}

func inputsKey(k *Kernel, s Spec) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "ingot-initramfs-v2\nkernel %s %s %s\nmodules %q\ncompression %s\nmtime %d\n", k.DebSHA256, k.Root, k.Version, s.Modules, s.Compression, s.MTime)
	files := map[string]string{"init": s.Agent}
	for n, p := range s.Extra {
		files["extra:"+n] = p
	}
	for _, n := range sortedKeys(files) {
		if files[n] == "" {
			continue
		}
		sum, err := fileSHA256(files[n])
		if err != nil {
			return "", fmt.Errorf("hashing input %s: %w", n, err)
		}
		fmt.Fprintf(h, "file %s %s\n", n, sum)
	}
	for _, n := range sortedKeys(s.ExtraData) {
		fmt.Fprintf(h, "data %s %x\n", n, sha256.Sum256(s.ExtraData[n]))
	}
	for _, f := range s.Files {
		fmt.Fprintf(h, "file %s %o %x\n", f.Path, f.Perm, sha256.Sum256(f.Data))
	}
	for _, n := range sortedKeys(s.Symlinks) {
		fmt.Fprintf(h, "link %s %s\n", n, s.Symlinks[n])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return writeAtomic(dst, b)
}

// writeAtomic writes b to a temporary file beside p and renames it over p.
func writeAtomic(p string, b []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return errors.Join(fmt.Errorf("writing %s: %w", p, err), os.Remove(tmp))
	}
	return nil
}
