package initramfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/kmod"
)

// DefaultModules are the drivers the agent needs in the QEMU lab and on
// common servers: virtio (net, blk), Intel e1000/e1000e, AHCI, NVMe, and
// the filesystems of a golden image's ESP and root for a kexec hand-off.
var DefaultModules = []string{
	"virtio_pci", "virtio_net", "virtio_blk", "e1000", "e1000e",
	"ahci", "sd_mod", "nvme", "vfat", "nls_cp437", "nls_ascii", "ext4",
	// ext4 needs crc32c through a soft dependency .modinfo does not list;
	// virtio_rng feeds the entropy pool (under TCG it stays empty for
	// minutes otherwise, which stalls DHCP).
	"crc32c_generic", "virtio_rng",
}

// ServerModules are DefaultModules and the drivers of the NICs, storage
// controllers and USB virtual media of the GPU servers ingot provisions:
// NVIDIA/Mellanox ConnectX (mlx5_core) and Intel (ice, i40e, ixgbe, igb),
// Broadcom (bnxt_en, tg3) ports for the boot network; SAS/RAID HBAs
// (megaraid_sas, mpt3sas, smartpqi) and USB storage (a BMC's virtual
// media) besides AHCI and NVMe; xfs for images that use it. Every one is
// in Debian 12's kernel package. `ingot initramfs build --modules server`.
var ServerModules = append(append([]string(nil), DefaultModules...),
	"mlx5_core", "ice", "i40e", "ixgbe", "igb", "bnxt_en", "tg3",
	"megaraid_sas", "mpt3sas", "smartpqi", "xhci_pci", "usb_storage", "uas", "xfs",
)

// ModuleSets names the module lists `--modules` takes by name.
var ModuleSets = map[string][]string{"lab": DefaultModules, "server": ServerModules}

// ModulesList is where the agent finds the modules to load: one absolute
// path per line, in load order.
const ModulesList = "etc/ingot/modules"

// Spec is what goes into an initramfs.
type Spec struct {
	// Agent is the path of the ingot-agent binary; it becomes /init.
	// Empty means no /init (for images that add their own through Extra).
	Agent string
	// KernelPkgDir is an unpacked (dpkg -x) linux-image package.
	KernelPkgDir string
	// KernelVersion names the version under lib/modules; "" if only one.
	KernelVersion string
	// Modules are module names; their dependencies are added.
	Modules []string
	// Extra maps archive paths to host files (mode kept: 0755 if executable).
	Extra map[string]string
	// ExtraData maps archive paths to contents (mode 0644, or 0755 for a
	// path under bin/ or sbin/ or named init).
	ExtraData map[string][]byte
	// Files are added with their own permissions (after Extra and ExtraData).
	Files []File
	// Symlinks maps archive paths to link targets.
	Symlinks map[string]string
	// Compression of the output; "" is gzip.
	Compression Compression
	// MTime stamps every entry (SOURCE_DATE_EPOCH); 0 is the default.
	MTime int64
}

// File is one file given by content.
type File struct {
	Path string
	Perm fs.FileMode
	Data []byte
}

// Result describes a built initramfs.
type Result struct {
	// Modules are the archive paths written to /etc/ingot/modules, in order.
	Modules []string `json:"modules"`
	// Entries is the number of archive members.
	Entries int `json:"entries"`
}

// Build writes the initramfs described by s to w.
func Build(ctx context.Context, s Spec, w io.Writer) (*Result, error) {
	var a Archive
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "mnt", "etc/ingot"} {
		if err := a.AddDir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if s.Agent != "" {
		b, err := os.ReadFile(s.Agent)
		if err != nil {
			return nil, fmt.Errorf("reading agent binary: %w", err)
		}
		if err := a.AddFile("init", 0o755, b); err != nil {
			return nil, err
		}
	}
	res := &Result{}
	if len(s.Modules) > 0 {
		mods, err := addModules(ctx, &a, s)
		if err != nil {
			return nil, err
		}
		res.Modules = mods
	}
	if err := addExtra(&a, s); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	if err := a.WriteTo(&raw, s.MTime); err != nil {
		return nil, err
	}
	res.Entries = len(a.Entries(s.MTime))
	if err := Compress(w, raw.Bytes(), s.Compression); err != nil {
		return nil, fmt.Errorf("compressing initramfs: %w", err)
	}
	return res, nil
}

// addModules resolves s.Modules, copies each .ko to its path under
// /lib/modules and writes the load order to /etc/ingot/modules.
func addModules(ctx context.Context, a *Archive, s Spec) ([]string, error) {
	if s.KernelPkgDir == "" {
		return nil, fmt.Errorf("modules %v requested but no kernel package folder given", s.Modules)
	}
	ix, err := kmod.Open(s.KernelPkgDir, s.KernelVersion)
	if err != nil {
		return nil, err
	}
	mods, err := ix.Resolve(s.Modules)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, m := range mods {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(m.Path)
		if err != nil {
			return nil, fmt.Errorf("reading module %s: %w", m.Name, err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(m.Path, s.KernelPkgDir), "/")
		if err := a.AddFile(rel, 0o644, b); err != nil {
			return nil, err
		}
		paths = append(paths, "/"+rel)
	}
	list := strings.Join(paths, "\n") + "\n"
	return paths, a.AddFile(ModulesList, 0o644, []byte(list))
}

func addExtra(a *Archive, s Spec) error {
	for _, name := range sortedKeys(s.Extra) {
		src := s.Extra[name]
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("extra file %s: %w", name, err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("extra file %s: %w", name, err)
		}
		perm := fs.FileMode(0o644)
		if st.Mode()&0o111 != 0 {
			perm = 0o755
		}
		if err := a.AddFile(name, perm, b); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(s.ExtraData) {
		perm := fs.FileMode(0o644)
		if d := path.Dir(strings.TrimPrefix(name, "/")); d == "bin" || d == "sbin" || strings.HasSuffix(d, "/bin") || path.Base(name) == "init" {
			perm = 0o755
		}
		if err := a.AddFile(name, perm, s.ExtraData[name]); err != nil {
			return err
		}
	}
	for _, f := range s.Files {
		if err := a.AddFile(f.Path, f.Perm, f.Data); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(s.Symlinks) {
		if err := a.AddSymlink(name, s.Symlinks[name]); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
