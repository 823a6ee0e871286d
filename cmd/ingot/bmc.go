package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
)

const bmcUsage = `Usage: ingot bmc COMMAND --endpoint URL (--user U --password-file F | --cred REF) [flags]

Commands:
  inventory               read and print the normalized hardware inventory
  power status|on|off|cycle
                          read or change the system's power (off: graceful, forced after --power-off-timeout)
  boot --target T [--uri URL] [--once]
                          set the boot override: Pxe, UefiHttp (with --uri), Hdd, Cd
  bios get                print the BIOS attributes in effect
  bios set K=V...         stage attributes (applied at the next reset)
  bios verify K=V...      list attributes that do not have the value (exit 1 if any)
  quirks                  list the BMC deviations ingot knows and handles (no BMC needed)
  firmware plan --pin COMPONENT=VERSION...
                          per component instance: found and pinned version, and what a
                          campaign would do (update, none, blocked-downgrade ...)
  rotate NODE...|--recipe R|--all
                          through the server (--server, as other commands): give enrolled
                          machines' BMC accounts new random passwords (secret: credentials only)

Values in K=V: true/false are booleans, integers are integers, "quoted" or
anything else is a string (Redfish attributes are typed: "1" is not 1).

Credentials: --user and --password-file (a file holding only the password), or
--cred file:PATH (lines username=NAME and password=SECRET, or one NAME:SECRET
line) or --cred env:VARIABLE (holding NAME:SECRET).
`

// runBMC dispatches `ingot bmc COMMAND`.
func runBMC(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || wantsHelp(args[:1]) {
		fmt.Fprint(e.stderr, bmcUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "inventory":
		return runBMCInventory(ctx, e, args[1:])
	case "power":
		return runBMCPower(ctx, e, args[1:])
	case "boot":
		return runBMCBoot(ctx, e, args[1:])
	case "bios":
		return runBMCBIOS(ctx, e, args[1:])
	case "firmware":
		return runBMCFirmware(ctx, e, args[1:])
	case "quirks":
		return runBMCQuirks(e, args[1:])
	case "rotate":
		return runBMCRotate(ctx, e, args[1:])
	}
	fmt.Fprintf(e.stderr, "ingot bmc: unknown command %q\n\n%s", args[0], bmcUsage)
	return errUsage
}

// bmcFlags are the connection flags every bmc command shares.
type bmcFlags struct {
	endpoint, user, passwordFile, cred, ca, output, logLevel string
	insecure                                                 bool
	timeout, powerOffTimeout, retryWait                      time.Duration
	retries                                                  int
}

func addBMCFlags(fs *flag.FlagSet) *bmcFlags {
	f := &bmcFlags{}
	fs.StringVar(&f.endpoint, "endpoint", "", "BMC base URL, e.g. https://10.0.0.5 (no /redfish/v1)")
	fs.StringVar(&f.user, "user", "", "BMC user name")
	fs.StringVar(&f.passwordFile, "password-file", "", "file holding the BMC password (one line)")
	fs.StringVar(&f.cred, "cred", "", "credential reference instead of --user/--password-file: file:PATH or env:VAR")
	fs.StringVar(&f.ca, "ca", "", "PEM file of the CA that signed the BMC's certificate")
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify the BMC's TLS certificate (lab only)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up on the whole command after this long")
	fs.DurationVar(&f.powerOffTimeout, "power-off-timeout", 5*time.Minute, "graceful shutdown time before forcing off")
	fs.IntVar(&f.retries, "retries", 5, "retries of a failed request (5xx, 409, connection errors); 0: none")
	fs.DurationVar(&f.retryWait, "retry-wait", 4*time.Second, "first wait between retries (doubles, capped at 4x)")
	fs.StringVar(&f.output, "o", "table", "output format: table or json")
	fs.StringVar(&f.logLevel, "log-level", "warn", "debug, info, warn or error")
	return f
}

// config turns the flags into a bmc.Config, resolving the password.
func (f *bmcFlags) config(e *env) (bmc.Config, error) {
	cfg := bmc.Config{Endpoint: f.endpoint, Username: f.user, CAFile: f.ca, Insecure: f.insecure,
		PowerOffTimeout: f.powerOffTimeout, Logger: e.logger(f.logLevel), Retries: f.retries, RetryWait: f.retryWait}
	if f.retries == 0 {
		cfg.Retries = -1 // bmc.Config: 0 means the default
	}
	if f.output != "table" && f.output != "json" {
		return cfg, fmt.Errorf("-o %q: expected table or json", f.output)
	}
	if f.endpoint == "" {
		return cfg, errors.New("--endpoint is required, e.g. --endpoint https://10.0.0.5")
	}
	switch {
	case f.cred != "":
		u, p, err := credential.Resolve(f.cred, e.getenv)
		if err != nil {
			return cfg, err
		}
		cfg.Username, cfg.Password = u, p
	case f.passwordFile != "":
		p, err := readPasswordFile(f.passwordFile)
		if err != nil {
			return cfg, err
		}
		cfg.Password = p
		if f.user == "" {
			return cfg, errors.New("--user is required with --password-file")
		}
	default:
		return cfg, errors.New("credentials: give --user and --password-file, or --cred file:PATH / env:VAR")
	}
	return cfg, nil
}

// readPasswordFile returns the first line of path, without its newline.
func readPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the password file: %w", err)
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	if !s.Scan() || s.Text() == "" {
		return "", fmt.Errorf("password file %s: expected the password on its first line, found nothing", path)
	}
	return strings.TrimRight(s.Text(), "\r"), nil
}

// bmcCommand parses flags, dials and runs fn with the client, always
// logging out.
func bmcCommand(ctx context.Context, e *env, name, synopsis string, args []string, setup func(*flag.FlagSet),
	fn func(context.Context, *bmc.Client, *bmcFlags, []string) error) error {
	fs := e.flagSet("bmc "+name, "bmc "+synopsis)
	f := addBMCFlags(fs)
	if setup != nil {
		setup(fs)
	}
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	cfg, err := f.config(e)
	if err != nil {
		return fmt.Errorf("bmc %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := bmc.Dial(ctx, cfg)
	if err != nil {
		return err
	}
	err = fn(ctx, c, f, pos)
	if cerr := c.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

func runBMCInventory(ctx context.Context, e *env, args []string) error {
	return bmcCommand(ctx, e, "inventory", "inventory --endpoint URL --user U --password-file F [--insecure] [--ca FILE] [-o table|json]", args, nil,
		func(ctx context.Context, c *bmc.Client, f *bmcFlags, _ []string) error {
			inv, err := c.Inventory(ctx)
			if err != nil {
				return err
			}
			inv.Taken = time.Now().UTC()
			if f.output == "json" {
				return e.printJSON(inv)
			}
			fmt.Fprintf(e.stdout, "BMC %s\n", c.Endpoint())
			var buf bytes.Buffer
			if err := writeInventorySummary(&buf, &wire.Snapshot{Taken: inv.Taken, Inventory: inv}); err != nil {
				return err
			}
			_, rest, _ := strings.Cut(buf.String(), "\n") // the summary's first line numbers a stored snapshot
			fmt.Fprintf(e.stdout, "Inventory from redfish, taken %s\n%s", tableTime(inv.Taken), rest)
			return nil
		})
}

func runBMCPower(ctx context.Context, e *env, args []string) error {
	return bmcCommand(ctx, e, "power", "power status|on|off|cycle --endpoint URL ...", args, nil,
		func(ctx context.Context, c *bmc.Client, f *bmcFlags, pos []string) error {
			if len(pos) != 1 {
				return errors.New("bmc power: expected one of status, on, off, cycle")
			}
			var err error
			switch pos[0] {
			case "status":
			case "on":
				err = c.PowerOn(ctx)
			case "off":
				err = c.PowerOff(ctx)
			case "cycle":
				err = c.PowerCycle(ctx)
			default:
				return fmt.Errorf("bmc power %q: expected status, on, off or cycle", pos[0])
			}
			if err != nil {
				return err
			}
			st, err := c.PowerState(ctx)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return e.printJSON(map[string]string{"endpoint": c.Endpoint(), "power_state": st})
			}
			fmt.Fprintln(e.stdout, st)
			return nil
		})
}

func runBMCBoot(ctx context.Context, e *env, args []string) error {
	var target, uri string
	var once bool
	return bmcCommand(ctx, e, "boot", "boot --target Pxe|UefiHttp|Hdd|Cd [--uri URL] [--once] --endpoint URL ...", args,
		func(fs *flag.FlagSet) {
			fs.StringVar(&target, "target", "", "boot target: Pxe, UefiHttp, Hdd or Cd")
			fs.StringVar(&uri, "uri", "", "HTTP boot URI (with --target UefiHttp)")
			fs.BoolVar(&once, "once", false, "only the next boot (default: every boot)")
		},
		func(ctx context.Context, c *bmc.Client, f *bmcFlags, _ []string) error {
			if target == "" {
				return errors.New("bmc boot: --target is required (Pxe, UefiHttp, Hdd, Cd)")
			}
			if err := c.SetBootOverride(ctx, target, uri, once); err != nil {
				return err
			}
			b, err := c.GetBootOverride(ctx)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return e.printJSON(b)
			}
			fmt.Fprintf(e.stdout, "boot override: %s (%s)%s\n", b.Target, b.Enabled, map[bool]string{true: " " + b.URI}[b.URI != ""])
			return nil
		})
}

func runBMCBIOS(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || !strings.Contains(" get set verify ", " "+args[0]+" ") {
		fmt.Fprint(e.stderr, "Usage: ingot bmc bios get|set K=V...|verify K=V... --endpoint URL ...\n")
		return errUsage
	}
	sub := args[0]
	return bmcCommand(ctx, e, "bios "+sub, "bios "+sub+" [K=V...] --endpoint URL ...", args[1:], nil,
		func(ctx context.Context, c *bmc.Client, f *bmcFlags, pos []string) error {
			if sub == "get" {
				attrs, err := c.Attributes(ctx)
				if err != nil {
					return err
				}
				if f.output == "json" {
					return e.printJSON(attrs)
				}
				t := newCLITable(e.stdout, "ATTRIBUTE", "VALUE")
				for _, k := range sortedKeys(attrs) {
					t.row(k, fmt.Sprint(attrs[k]))
				}
				return t.flush()
			}
			want, err := parseAttributes(pos)
			if err != nil {
				return fmt.Errorf("bmc bios %s: %w", sub, err)
			}
			if sub == "set" {
				res, err := c.ApplyBIOS(ctx, want)
				if err != nil {
					return err
				}
				if f.output == "json" {
					return e.printJSON(res)
				}
				fmt.Fprintf(e.stdout, "staged %d attribute(s) at %s, applied at the next reset: %s\n", len(res.Changed), res.Target, strings.Join(res.Changed, ", "))
				if res.Fallback != "" {
					fmt.Fprintf(e.stdout, "vendor fallback: %s\n", res.Fallback)
				}
				return nil
			}
			bad, err := c.VerifyBIOS(ctx, want)
			if err != nil {
				return err
			}
			if f.output == "json" {
				if err := e.printJSON(map[string]any{"mismatches": bad}); err != nil {
					return err
				}
			} else {
				for _, m := range bad {
					fmt.Fprintln(e.stdout, m.String())
				}
				if len(bad) == 0 {
					fmt.Fprintf(e.stdout, "all %d attribute(s) in effect\n", len(want))
				}
			}
			if len(bad) > 0 {
				return exitError(1)
			}
			return nil
		})
}

// parseAttributes reads K=V arguments into typed BIOS values.
func parseAttributes(args []string) (map[string]any, error) {
	if len(args) == 0 {
		return nil, errors.New("expected at least one NAME=VALUE")
	}
	out := map[string]any{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: expected NAME=VALUE", a)
		}
		out[k] = parseAttrValue(v)
	}
	return out, nil
}

// parseAttrValue: true/false -> bool, an integer -> int64, "quoted" -> the
// string inside, anything else -> the string.
func parseAttrValue(v string) any {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
		return b
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i
	}
	return v
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
