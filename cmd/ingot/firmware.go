package main

import (
	"context"
	"fmt"

	"github.com/ingot-dev/ingot/pkg/firmware"
)

const firmwareUsage = `Usage: ingot firmware COMMAND [flags]

Commands:
  import FILE [--data DIR] [--name NAME]
              put a firmware package (a vendor update file or bundle) into the
              content store; a recipe pin names it by the sha256 printed:
                firmware:
                  bmc: {version: 1.46.0, package: SHA256, policy: update}

The plan of one BMC: ingot bmc firmware plan --endpoint URL ... --pin COMPONENT=VERSION
`

// runFirmware implements `ingot firmware import`.
func runFirmware(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || wantsHelp(args[:1]) {
		fmt.Fprint(e.stderr, firmwareUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	if args[0] != "import" {
		fmt.Fprintf(e.stderr, "ingot firmware: unknown command %q\n\n%s", args[0], firmwareUsage)
		return errUsage
	}
	fs := e.flagSet("firmware import", "firmware import FILE [--data DIR] [--name NAME]")
	data := fs.String("data", defaultDataDir, "content store folder")
	name := fs.String("name", "", "human name for the package (default: the file's base name)")
	if err := e.parse(fs, flagsFirst(fs, args[1:])); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	res, err := firmware.Import(ctx, *data, fs.Arg(0), *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s  %s  %d bytes\n", res.SHA256, res.Name, res.Size)
	return nil
}
