package lab

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ingot-dev/ingot/pkg/image"
	"github.com/ingot-dev/ingot/pkg/initramfs"
)

// Pins are the artifacts a lab boots, with their sha256s.
type Pins struct {
	Kernel       string `json:"kernel"`
	KernelSHA256 string `json:"kernel_sha256"`
	Initrd       string `json:"initrd"`
	InitrdSHA256 string `json:"initrd_sha256"`
	ImageName    string `json:"image_name"` // the folder of images/ the recipe installs
	Image        string `json:"image"`      // raw.zst
	ImageSHA256  string `json:"image_sha256"`
	ImageRaw     string `json:"image_raw"`
	RawSHA256    string `json:"raw_sha256"`
	RawSize      int64  `json:"raw_size"`
}

func cacheDir(cfg Config) string { return initramfs.CacheDir(cfg.Getenv) }

// buildArtifacts builds (or reuses from the cache) the agent's kernel and
// initramfs (with agent, the ingot-agent binary of arch) and the lab image,
// for arch "" (x86-64) or "arm64" (Debian's arm64 kernel package, fetched
// with apt-get download). Every lab and end-to-end test on a machine
// shares one build: the initramfs is cached by a digest of its inputs and
// the image build by a digest of its definition.
func buildArtifacts(ctx context.Context, cfg Config, imageName, arch, agent string) (*Pins, error) {
	cache := cacheDir(cfg)
	out, err := AgentBoot(ctx, cache, arch, agent)
	if err != nil {
		return nil, err
	}
	is, err := image.Load(filepath.Join(cfg.RepoRoot, "images", imageName))
	if err != nil {
		return nil, err
	}
	if want := orAMD64(arch); is.DebArch() != want {
		return nil, fmt.Errorf("lab image %s is for %s, its VMs are %s (the recipe's os.image.name)", imageName, is.DebArch(), want)
	}
	// The image's kernel is its lock's (images/NAME/packages.lock), kept
	// in the lab's pool beside the cache.
	res, err := image.BuildCached(ctx, is, image.Options{Cache: cache, Pool: image.CachePool(cache)})
	if err != nil {
		return nil, fmt.Errorf("lab image %s: %w", imageName, err)
	}
	return &Pins{ImageName: imageName,
		Kernel: out.Vmlinuz, KernelSHA256: out.VmlinuzSHA256, Initrd: out.Initrd, InitrdSHA256: out.InitrdSHA256,
		Image: res.Zst, ImageSHA256: res.ZstSHA256, ImageRaw: res.Raw, RawSHA256: res.RawSHA256, RawSize: res.RawSize,
	}, nil
}

func orAMD64(arch string) string {
	if arch == "" {
		return "amd64"
	}
	return arch
}

// AgentBoot builds (or reuses from cache, the folder initramfs.CacheDir
// names) the agent kernel and initramfs the lab boots, for arch "" (x86-64)
// or "arm64", with agent as /init: the same files `make lab` builds, keyed
// by a digest of their inputs, so every lab, end-to-end test and boot storm
// on a machine shares one build.
func AgentBoot(ctx context.Context, cache, arch, agent string) (*initramfs.Output, error) {
	k, err := initramfs.FetchKernelFor(ctx, cache, "auto", arch)
	if err != nil {
		return nil, fmt.Errorf("lab kernel: %w", err)
	}
	// The same drivers on arm64: Debian builds each of them as a module
	// there too (virtio_pci, virtio_net, virtio_blk, ...).
	spec := initramfs.Spec{Agent: agent, Modules: initramfs.DefaultModules}
	key, err := initramfs.InputsKey(k, spec)
	if err != nil {
		return nil, err
	}
	out, err := initramfs.BuildKernelAndInitrd(ctx, k, spec, filepath.Join(cache, "initramfs", key[:16]))
	if err != nil {
		return nil, fmt.Errorf("lab initramfs: %w", err)
	}
	return out, nil
}
