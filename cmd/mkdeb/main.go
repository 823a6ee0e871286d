// Command mkdeb writes ingot's Debian package for one architecture from
// binaries already built for it (make deb builds them and runs this):
//
//	mkdeb --arch arm64 --bin build/deb/arm64 --host-ingot bin/ingot \
//	      --describe "$(git describe --tags --always --dirty)" --commit HASH --out dist
//
// SOURCE_DATE_EPOCH (make deb: the commit's time) dates every file, the man
// page and the changelog, so one commit gives the same bytes anywhere.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/debpkg"
	"github.com/ingot-dev/ingot/pkg/packaging/deb"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
}

type options struct {
	arch, bin, hostIngot, describe, commit, out, maintainer, license, modCache, goroot string
	epoch                                                                              time.Time
}

func parse(args []string, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("mkdeb", flag.ContinueOnError)
	fs.StringVar(&o.arch, "arch", "amd64", "Debian architecture: amd64 or arm64")
	fs.StringVar(&o.bin, "bin", "", "folder with ingot and ingot-agent built for --arch")
	fs.StringVar(&o.hostIngot, "host-ingot", "bin/ingot", "an ingot this host runs, to generate the man page, completion and configuration")
	fs.StringVar(&o.describe, "describe", "", "git describe --tags --always --dirty (the version)")
	fs.StringVar(&o.commit, "commit", "", "the commit built")
	fs.StringVar(&o.out, "out", "dist", "folder the .deb is written to")
	fs.StringVar(&o.maintainer, "maintainer", "ingot maintainers <ingot-dev@users.noreply.github.com>", "Maintainer field")
	fs.StringVar(&o.license, "license", "LICENSE", "ingot's license file (missing: none is granted, and the copyright file says so)")
	fs.StringVar(&o.modCache, "modcache", getenv("GOMODCACHE"), "Go module cache (license files)")
	fs.StringVar(&o.goroot, "goroot", getenv("GOROOT"), "Go root (the standard library's license)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	sde, err := strconv.ParseInt(getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return o, fmt.Errorf("SOURCE_DATE_EPOCH=%q: expected the commit's time in seconds (make deb sets it)", getenv("SOURCE_DATE_EPOCH"))
	}
	o.epoch = time.Unix(sde, 0).UTC()
	if o.arch != "amd64" && o.arch != "arm64" {
		return o, fmt.Errorf("--arch %q: expected amd64 or arm64", o.arch)
	}
	if o.bin == "" || o.describe == "" || o.commit == "" || o.modCache == "" || o.goroot == "" {
		return o, errors.New("--bin, --describe, --commit, --modcache (GOMODCACHE) and --goroot (GOROOT) are required")
	}
	return o, nil
}

func run(args []string, getenv func(string) string, stdout io.Writer) error {
	o, err := parse(args, getenv)
	if err != nil {
		return err
	}
	in, err := inputs(o)
	if err != nil {
		return err
	}
	p, err := deb.Build(in)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		return err
	}
	path := filepath.Join(o.out, p.FileName())
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Fprintln(stdout, path)
	return nil
}

// inputs reads the binaries and generates the rest.
func inputs(o options) (deb.Inputs, error) {
	in := deb.Inputs{Arch: o.arch, Maintainer: o.maintainer, MTime: o.epoch}
	var err error
	if in.Version, err = debpkg.Version(o.describe, o.epoch); err != nil {
		return in, err
	}
	ingot, agent := filepath.Join(o.bin, "ingot"), filepath.Join(o.bin, "ingot-agent")
	if in.Ingot, err = os.ReadFile(ingot); err != nil {
		return in, err
	}
	if in.Agent, err = os.ReadFile(agent); err != nil {
		return in, err
	}
	sde := strconv.FormatInt(o.epoch.Unix(), 10)
	for _, g := range []struct {
		dst  *[]byte
		args []string
	}{
		{&in.Man, []string{"help-man"}},
		{&in.Completion, []string{"help-completion", "bash"}},
		// The package's choices: no DHCP and no TFTP until the operator
		// names the boot interface; recipes in /etc/ingot/recipes.
		{&in.Config, []string{"help-config", "--set", `dhcp="off"`, "--set", "tftp=false", "--set", "recipes=/etc/ingot/recipes"}},
	} {
		if *g.dst, err = generate(o.hostIngot, sde, g.args...); err != nil {
			return in, err
		}
	}
	mods, err := deb.Modules([]string{ingot, agent}, o.modCache, o.goroot)
	if err != nil {
		return in, err
	}
	license, err := os.ReadFile(o.license)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return in, err
	}
	in.Copyright = deb.Copyright(string(license), mods)
	in.Changelog = deb.Changelog(in.Version, o.commit, o.describe, o.maintainer, o.epoch)
	return in, nil
}

// generate runs the host's ingot with a clean environment but the date.
func generate(ingot, sde string, args ...string) ([]byte, error) {
	cmd := exec.Command(ingot, args...)
	cmd.Env = []string{"SOURCE_DATE_EPOCH=" + sde, "PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", ingot, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
