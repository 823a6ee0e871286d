package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// DashboardURL is the dashboard inside the lab's namespace.
func (l *Lab) DashboardURL() string { return l.State.APIURL + "/ui/" }

// ForwardDashboard makes the lab's API listener, and so its dashboard,
// reachable from the host: every connection to ln is joined to the API's
// address inside the namespace (the lab keeps the host's network apart:
// nothing else crosses). TLS passes through untouched; serve's
// certificate names 127.0.0.1, so https://127.0.0.1:PORT/ui/ verifies
// against the lab's CA. It returns when ctx ends.
func (l *Lab) ForwardDashboard(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	target := net.JoinHostPort(ServerIP, strconv.Itoa(apiPort))
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("lab: forwarding the dashboard: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			up, err := l.ns.DialContext(ctx, "tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			select {
			case <-done:
			case <-ctx.Done():
			}
		}()
	}
}
