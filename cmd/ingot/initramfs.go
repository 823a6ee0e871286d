package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/initramfs"
)

// runInitramfs implements `ingot initramfs build|ls`.
func runInitramfs(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "Usage: ingot initramfs build|ls [flags]")
		return errUsage
	}
	switch args[0] {
	case "build":
		return runInitramfsBuild(ctx, e, args[1:])
	case "ls":
		return runInitramfsLs(e, args[1:])
	}
	fmt.Fprintf(e.stderr, "ingot initramfs: unknown subcommand %q (expected build or ls)\n", args[0])
	return errUsage
}

func runInitramfsBuild(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("initramfs build", "initramfs build --kernel-deb auto|PATH --agent BIN [--arch amd64|arm64] [--out DIR] [--modules a,b]")
	kernelDeb := fs.String("kernel-deb", "auto", "linux-image .deb, an unpacked package folder, or auto (apt-get download what linux-image-ARCH depends on)")
	arch := fs.String("arch", "amd64", "the machines' Debian architecture, for --kernel-deb auto: amd64 or arm64 (linux-image-arm64:arm64; dpkg --add-architecture arm64 first); --agent must be built for it")
	agent := fs.String("agent", "bin/ingot-agent", "the ingot-agent binary; becomes /init")
	out := fs.String("out", "", "output folder for vmlinuz and initrd.img (default: CACHE/initramfs/<inputs digest>)")
	modules := fs.String("modules", "lab", "kernel modules to include (dependencies are added): a comma-separated list, or a set: lab (virtio, e1000, AHCI, NVMe: "+strings.Join(initramfs.DefaultModules, ",")+") or server (lab's and real servers' NICs, HBAs and USB virtual media: mlx5_core, ice, i40e, ixgbe, igb, bnxt_en, tg3, megaraid_sas, mpt3sas, smartpqi, usb_storage, xfs)")
	compression := fs.String("compression", "gzip", "gzip, zstd or none")
	cache := fs.String("cache", initramfs.CacheDir(e.getenv), "cache for kernel packages and builds")
	format := fs.String("o", "table", "output format: table or json")
	if err := e.parse(fs, flagsFirst(fs, args)); err != nil {
		return err
	}
	comp, err := initramfs.ParseCompression(*compression)
	if err != nil {
		return err
	}
	mtime, err := sourceDateEpoch(e.getenv)
	if err != nil {
		return err
	}
	if *arch != "amd64" && *arch != "arm64" {
		return fmt.Errorf("--arch %q: expected amd64 or arm64", *arch)
	}
	k, err := initramfs.FetchKernelFor(ctx, *cache, *kernelDeb, *arch)
	if err != nil {
		return fmt.Errorf("fetching the kernel: %w", err)
	}
	spec := initramfs.Spec{Agent: *agent, Modules: moduleList(*modules), Compression: comp, MTime: mtime}
	dir := *out
	if dir == "" {
		key, err := initramfs.InputsKey(k, spec)
		if err != nil {
			return err
		}
		dir = filepath.Join(*cache, "initramfs", key[:16])
	}
	res, err := initramfs.BuildKernelAndInitrd(ctx, k, spec, dir)
	if err != nil {
		return fmt.Errorf("building the initramfs: %w", err)
	}
	if *format == "json" {
		return e.printJSON(res)
	}
	fmt.Fprintf(e.stdout, "kernel  %s  %s  (%s)\n", res.VmlinuzSHA256, res.Vmlinuz, k.Version)
	fmt.Fprintf(e.stdout, "initrd  %s  %s\n", res.InitrdSHA256, res.Initrd)
	return nil
}

func runInitramfsLs(e *env, args []string) error {
	fs := e.flagSet("initramfs ls", "initramfs ls FILE")
	if err := e.parse(fs, flagsFirst(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := initramfs.Decompress(f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", fs.Arg(0), err)
	}
	defer r.Close()
	entries, err := initramfs.Read(r)
	for _, en := range entries {
		fmt.Fprintln(e.stdout, en)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", fs.Arg(0), err)
	}
	return nil
}

// sourceDateEpoch returns $SOURCE_DATE_EPOCH, 0 when unset.
func sourceDateEpoch(getenv func(string) string) (int64, error) {
	s := getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, errors.New("SOURCE_DATE_EPOCH=" + s + ": expected seconds since 1970")
	}
	return v, nil
}

// splitCommaList splits a comma-separated flag value, dropping empty items.
func splitCommaList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// moduleList is --modules: a named set (initramfs.ModuleSets) or a list.
func moduleList(v string) []string {
	if set, ok := initramfs.ModuleSets[v]; ok {
		return set
	}
	return splitCommaList(v)
}
