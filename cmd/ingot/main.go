// Command ingot is the provisioning server and the operator CLI in one static
// binary. Each subcommand lives in its own file of this folder; the explicit
// list in commands() is the only registry.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/ingot-dev/ingot/pkg/store"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile := cpuProfile(os.Getenv("INGOT_CPUPROFILE"))
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	stop()
	code, say := exitCode(err)
	if say {
		fmt.Fprintln(os.Stderr, "ingot:", err)
	}
	if code != 0 {
		os.Exit(code)
	}
}

// exitConfig is sysexits.h's EX_CONFIG: a refusal that no restart fixes
// (the process lacks a privilege its configuration needs; the store was
// written by a newer ingot). ingot.service does not restart on it
// (RestartPreventExitStatus=78): a loop of restarts would only fill the
// journal, and the message says what to change.
const exitConfig = 78

// exitCode is the status main exits with for run's error, and whether the
// error is printed.
func exitCode(err error) (code int, say bool) {
	var ee exitError
	var ne needsError
	switch {
	case err == nil:
		return 0, false
	case errors.As(err, &ee):
		return int(ee), false
	case errors.Is(err, errUsage):
		return 2, false
	case errors.As(err, &ne), errors.Is(err, store.ErrSchemaNewer):
		return exitConfig, true
	}
	return 1, true
}

// needsError is a refusal of what the process lacks (privcheck), which a
// restart does not change: main exits exitConfig.
type needsError struct{ error }

func (e needsError) Unwrap() error { return e.error }

// command is one subcommand of ingot.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands lists every subcommand, in the order `ingot help` shows them.
func commands() []command {
	return []command{
		{"serve", "run DHCP, TFTP, HTTP boot and the API on one interface", runServe},
		{"recipe", "lint, diff and describe recipes (server classes)", runRecipe},
		{"machine", "enroll and manage machines: add, ls, show, rm, set-recipe, inspect", runMachine},
		{"inventory", "show a machine's hardware inventory, its history and diffs", runInventory},
		{"events", "show a machine's event log", runEvents},
		{"bmc", "talk to a BMC over Redfish: inventory, power, boot; rotate passwords through the server", runBMC},
		{"vbmc", "run virtual Redfish BMCs from mockups or QEMU", runVBMC},
		{"reimage", "re-image machines from their recipe", runReimage},
		{"drill", "restore drill: reimage a drill candidate of a class from its recipe and time it", runDrill},
		{"burnin", "judge a burn-in tool's saved output against a recipe's check, as the node and server do", runBurnin},
		{"rollout", "provision a recipe's machines in waves", runRollout},
		{"job", "list, show and cancel jobs", runJob},
		{"token", "create, list and revoke API tokens", runToken},
		{"secret", "keep BMC credentials sealed in the server's store, bound to their BMC endpoints: set, allow, ls, rm, rotate-key", runSecret},
		{"config", "named server contexts for the CLI (like kubectl's)", runConfig},
		{"alerts", "telemetry alerts now; alerts rules: the same rules for Prometheus", runAlerts},
		{"readings", "every machine's last BMC readings: watts, temperatures, fans, PSUs", runReadings},
		{"power", "power report: watts, kWh, cost per GPU-hour per node; headroom per rack", runPower},
		{"plan", "plan capacity: what N more servers of a class draw and cost, and which racks have room", runPlan},
		{"backup", "a consistent copy of the running server's database", runBackup},
		{"admin", "offline: the database file directly, while no server runs (check, restore, tokens)", runAdmin},
		{"image", "build, import and list golden images", runImage},
		{"firmware", "import firmware packages; plan and apply firmware campaigns to recipes' pins", runFirmware},
		{"initramfs", "build the agent's initramfs", runInitramfs},
		{"lab", "a network-booting QEMU lab in a network namespace", runLab},
		{"version", "print the version", runVersion},
	}
}

// errUsage marks an error already explained to the user on stderr.
var errUsage = errors.New("usage")

// exitError asks main to exit with a code without printing more.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runEnv(ctx, &env{stdout: stdout, stderr: stderr, getenv: os.Getenv}, args)
}

// runEnv runs the command args names with e's streams and environment.
func runEnv(ctx context.Context, e *env, args []string) error {
	stderr := e.stderr
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stdout)
		return nil
	}
	// The hidden generators (helpgen.go) come after the listed commands.
	for _, c := range append(commands(), hiddenCommands()...) {
		if c.name == args[0] {
			if err := c.run(ctx, e, args[1:]); !errors.Is(err, errHelp) {
				return err
			}
			return nil
		}
	}
	fmt.Fprintf(stderr, "ingot: unknown command %q\n\n", args[0])
	usage(stderr)
	return errUsage
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "ingot %s: provision GPU fleets from recipes\n\nUsage: ingot COMMAND [flags]\n\nCommands:\n", version)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'ingot COMMAND -h' for a command's flags.")
}

func runVersion(_ context.Context, e *env, _ []string) error {
	fmt.Fprintln(e.stdout, version)
	return nil
}

// cpuProfile writes a CPU profile of the whole run to path (the
// INGOT_CPUPROFILE variable, for finding where a benchmark's time goes);
// "" profiles nothing.
func cpuProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ingot: INGOT_CPUPROFILE:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "ingot: INGOT_CPUPROFILE:", err)
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
