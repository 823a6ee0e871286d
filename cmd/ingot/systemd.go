package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ingot-dev/ingot/pkg/sdnotify"
	"github.com/ingot-dev/ingot/pkg/serve"
)

// systemdReady returns serve's Deps.Ready under a Type=notify unit
// (ingot.service): READY=1 with a status line once every listener is bound,
// RELOADING=1 then READY=1 around each SIGHUP (recipes and the certificate
// reload in their own services, which log the outcome), STOPPING=1 when ctx
// ends. Outside systemd it returns nil (serve calls no Ready).
func systemdReady(ctx context.Context, e *env, log *slog.Logger) func(serve.Addrs) {
	n, err := sdnotify.New(e.getenv)
	if err != nil {
		log.Warn("not telling systemd our state", "err", err)
		return nil
	}
	if n == nil {
		return nil
	}
	report := func(what string, err error) {
		if err != nil {
			log.Warn("telling systemd "+what, "err", err)
		}
	}
	return func(a serve.Addrs) {
		status := readyStatus(a)
		report("ready", n.Ready(status))
		context.AfterFunc(ctx, func() { report("stopping", n.Stopping()) })
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		go func() {
			defer signal.Stop(hup)
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					report("reloading", n.Reloading())
					report("ready", n.Ready(status))
				}
			}
		}()
	}
}

// readyStatus is the line `systemctl status ingot` shows.
func readyStatus(a serve.Addrs) string {
	parts := []string{"boot http " + a.HTTP.String()}
	if a.API != nil {
		parts = append(parts, "api "+a.API.String())
	}
	if a.TFTP != nil {
		parts = append(parts, "tftp "+a.TFTP.String())
	}
	if a.ServerIP.IsValid() {
		parts = append(parts, "server ip "+a.ServerIP.String())
	}
	return fmt.Sprintf("serving: %s", strings.Join(parts, ", "))
}
