package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/image"
	"github.com/ingot-dev/ingot/pkg/initramfs"
)

// defaultDataDir is where ingot keeps its content store by default.
const defaultDataDir = "/var/lib/ingot/artifacts"

// runImage implements `ingot image build|lock|import|ls`.
func runImage(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "Usage: ingot image build|lock|import|ls [flags]")
		return errUsage
	}
	switch args[0] {
	case "build":
		return runImageBuild(ctx, e, args[1:])
	case "lock":
		return runImageLock(ctx, e, args[1:])
	case "import":
		return runImageImport(ctx, e, args[1:])
	case "ls":
		return runImageLs(ctx, e, args[1:])
	}
	fmt.Fprintf(e.stderr, "ingot image: unknown subcommand %q (expected build, lock, import or ls)\n", args[0])
	return errUsage
}

func runImageBuild(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("image build", "image build images/NAME [--out DIR] [--plan]")
	cache := fs.String("cache", initramfs.CacheDir(e.getenv), "cache for unpacked kernel packages")
	out := fs.String("out", "", "output folder (default: CACHE/images/NAME-VERSION)")
	pool := fs.String("pool", defaultDataDir, "content store that keeps the locked .debs (images/NAME/packages.lock), fetched there when absent")
	moduleKey := fs.String("module-key", "", "the site's module signing key (PEM): DKMS signs the modules it builds with it; never stored in the image")
	moduleCert := fs.String("module-cert", "", "the certificate of --module-key (PEM or DER), enrolled in the machines' firmware (db or MOK)")
	plan := fs.Bool("plan", false, "print the commands and pins without running them")
	verbose := fs.Bool("v", false, "print each command as it runs")
	keep := fs.Bool("keep-work", false, "leave the work folder (OUT/.NAME.work: root, repository, partitions) to compare builds")
	format := fs.String("o", "table", "output format: table or json")
	imp := fs.Bool("import", false, "also add NAME.raw.zst to the content store (--data)")
	data := fs.String("data", defaultDataDir, "content store folder for --import")
	spec, err := parseImageArgs(e, fs, args)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(*cache, "images", spec.Name+"-"+spec.Version)
	}
	opts := image.Options{Out: *out, Cache: *cache, Pool: *pool, ModuleKey: *moduleKey, ModuleCert: *moduleCert, KeepWork: *keep}
	if *plan {
		p, err := image.MakePlan(spec, opts)
		if err != nil {
			return err
		}
		if *format == "json" {
			return e.printJSON(p)
		}
		fmt.Fprintf(e.stdout, "# image %s version %s\n", p.Image, p.Version)
		for _, su := range sortedStrings(p.Mirrors) {
			fmt.Fprintf(e.stdout, "# mirror %s %s (from the host's apt sources)\n", su, p.Mirrors[su])
		}
		for _, pin := range p.Pins {
			fmt.Fprintf(e.stdout, "# pin %s\n", pin)
		}
		for _, c := range p.Commands {
			fmt.Fprintln(e.stdout, c)
		}
		return nil
	}
	if *verbose {
		opts.Log = e.stderr
	}
	res, err := image.Build(ctx, spec, opts)
	if err != nil {
		return err
	}
	if *imp {
		if _, err := image.Import(ctx, *data, res.Zst, ""); err != nil {
			return err
		}
	}
	if *format == "json" {
		return e.printJSON(res)
	}
	fmt.Fprintf(e.stdout, "raw.zst  %s  %s  (pin this in the recipe: os.image.sha256)\n", res.ZstSHA256, res.Zst)
	fmt.Fprintf(e.stdout, "raw      %s  %s\n", res.RawSHA256, res.Raw)
	return nil
}

func runImageLock(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("image lock", "image lock images/NAME [--pool DIR]\n\n"+
		"Resolves every .deb that goes into the image from the apt sources in force (the host's mirrors, the\n"+
		"image's repositories), keeps each in the pool and writes images/NAME/packages.lock, which every build\n"+
		"checks. A debian image is resolved by a real mmdebstrap run (root; minutes; DKMS compiles nothing in it).")
	cache := fs.String("cache", initramfs.CacheDir(e.getenv), "cache for unpacked kernel packages")
	pool := fs.String("pool", defaultDataDir, "content store that keeps the locked .debs")
	verbose := fs.Bool("v", false, "print each command as it runs")
	spec, err := parseImageArgs(e, fs, args)
	if err != nil {
		return err
	}
	opts := image.Options{Cache: *cache, Pool: *pool}
	if *verbose {
		opts.Log = e.stderr
	}
	l, err := image.LockImage(ctx, spec, opts)
	if err != nil {
		return err
	}
	var size int64
	for _, p := range l.Packages {
		size += p.Size
	}
	fmt.Fprintf(e.stdout, "%s: %d packages (%d MB), kept in %s\n", filepath.Join(spec.Dir, image.LockFile), len(l.Packages), size>>20, *pool)
	return nil
}

// parseImageArgs parses the flags and loads the one image folder named.
func parseImageArgs(e *env, fs *flag.FlagSet, args []string) (*image.Spec, error) {
	if err := e.parse(fs, flagsFirst(fs, args)); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return nil, errUsage
	}
	return image.Load(fs.Arg(0))
}

func sortedStrings(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

func runImageImport(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("image import", "image import FILE [--data DIR] [--name NAME]")
	data := fs.String("data", defaultDataDir, "content store folder")
	name := fs.String("name", "", "human name for the image (default: the file's base name)")
	if err := e.parse(fs, flagsFirst(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	res, err := image.Import(ctx, *data, fs.Arg(0), *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s  %s\n", res.SHA256, res.Name)
	return nil
}

func runImageLs(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("image ls", "image ls [--server URL]")
	af := addAPIFlags(fs)
	if err := e.parse(fs, flagsFirst(fs, args)); err != nil {
		return err
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("image ls: %w", err)
	}
	imgs, err := c.Images(ctx)
	if err != nil {
		return fmt.Errorf("image ls: %w", err)
	}
	return e.render(af.output, imgs, func() error {
		t := newCLITable(e.stdout, "NAME", "SHA256", "SIZE")
		for _, im := range imgs {
			t.row(strings.TrimSpace(im.Name), im.SHA256, fmt.Sprint(im.Size))
		}
		return t.flush()
	})
}

// flagsFirst moves positional arguments after the flags, so
// `ingot image build images/lab --out DIR` works like `--out DIR images/lab`.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !(ok && bf.IsBoolFlag()) && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(flags, pos...)
}
