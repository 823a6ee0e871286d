package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/ingot-dev/ingot/pkg/serve"
)

// serveGCPercent is the GC target `ingot serve` runs with unless GOGC is set.
const serveGCPercent = 400

// runServe is `ingot serve`: its settings (flags, INGOT_* variables, a
// config file; see pkg/serve), then serve.Run, which builds every part
// and runs it until SIGTERM or SIGINT. SIGHUP reloads the recipes and the
// API certificate.
func runServe(ctx context.Context, e *env, args []string) error {
	cfg, err := serve.Load(args, e.getenv, e.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		fmt.Fprintln(e.stderr, "ingot serve:", err)
		return errUsage
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if e.getenv("GOGC") == "" {
		// A DHCP storm allocates a little per packet in a small heap; the
		// default GOGC=100 spent ~12% of the server's CPU in GC (measured with
		// the DHCP benchmark). A few MiB more heap is the cheaper side.
		debug.SetGCPercent(serveGCPercent)
	}
	log := e.logger(cfg.LogLevel)
	// What the process lacks (capabilities, permissions) is said up front,
	// naming what needs it, never as a bare EPERM later.
	if err := checkPrivileges(cfg, log); err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serve.Run(ctx, cfg, serve.Options{Logger: log, Version: version, Getenv: e.getenv, Reload: hup,
		Ready: systemdReady(ctx, e, log)})
}
