package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/ingot-dev/ingot/pkg/agent/pid1"
	"github.com/ingot-dev/ingot/pkg/warm"
)

// runWarm implements `ingot-agent warm`, the installed system's warm
// reimage service (pkg/warm): it listens on the configured port over TLS
// and, at a request signed by its ingot server, fetches the machine's
// agent boot and kexecs into it. The kexec does not shut the OS down
// cleanly (filesystems are synced first): the agent is about to write a
// new image over this one.
func runWarm(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ingot-agent warm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", warm.ConfigPath, "the service's settings, written by the agent (JSON)")
	dir := fs.String("dir", "/run/ingot/warm", "where the agent's kernel and initrd are downloaded (a tmpfs)")
	listen := fs.String("listen", "", "address to listen on (default :PORT from the settings)")
	nonces := fs.String("nonces", warm.NoncePath, "the nonces of the requests taken, so a restart does not take one again (JSON, rewritten whole)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(stdout, nil)).With("service", "ingot-warm")
	b, err := os.ReadFile(*cfgFile)
	if err != nil {
		fmt.Fprintf(stderr, "ingot-agent warm: %v\n", err)
		return 1
	}
	cfg, err := warm.ParseConfig(b)
	if err != nil {
		fmt.Fprintf(stderr, "ingot-agent warm: %s: %v\n", *cfgFile, err)
		return 1
	}
	svc, err := warm.NewService(cfg, warm.Options{Dir: *dir, Nonces: *nonces, Kexec: pid1.Kexec, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "ingot-agent warm: %v\n", err)
		return 1
	}
	tlsCfg, err := warm.TLSConfig(cfg.Machine)
	if err != nil {
		fmt.Fprintf(stderr, "ingot-agent warm: %v\n", err)
		return 1
	}
	addr := *listen
	if addr == "" {
		addr = net.JoinHostPort("", strconv.Itoa(cfg.Port))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "ingot-agent warm: %v\n", err)
		return 1
	}
	lim := warm.DefaultLimits()
	log.Info("listening for signed warm reimage requests", "addr", addr, "machine", cfg.Machine, "server", cfg.Server,
		"read_timeout", lim.ReadTimeout, "conns_per_client", lim.MaxConnsPerClient)
	if err := warm.Serve(ctx, ln, svc, tlsCfg, lim, log); err != nil {
		fmt.Fprintf(stderr, "ingot-agent warm: %v\n", err)
		return 1
	}
	return 0
}
