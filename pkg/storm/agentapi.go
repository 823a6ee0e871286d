package storm

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// exchange is the agent's first call, made as cmd/ingot-agent makes it:
// the kernel command line parsed by the agent's own parser, the API client
// the agent uses (api.AgentClient: its retries and backoff), the server's
// certificate pinned to ingot.ca, from the machine's address.
func (b *boot) exchange(ctx context.Context, sr *StepResult) error {
	cfg, err := agent.ParseCmdline(b.agent)
	if err != nil {
		return fmt.Errorf("the script's kernel command line: %w", err)
	}
	if cfg.Token == "" {
		return fmt.Errorf("the script's kernel command line has no ingot.token (ingot.mode=%q): no credential to exchange", cfg.Mode)
	}
	tr := &http.Transport{Proxy: nil, TLSHandshakeTimeout: 10 * time.Second, DialContext: (&net.Dialer{
		LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(b.ip, 0)), Timeout: 15 * time.Second}).DialContext}
	if cfg.CA != "" {
		if tr.TLSClientConfig, err = tlsca.Pinned(cfg.CA); err != nil {
			return fmt.Errorf("ingot.ca %q: %w", cfg.CA, err)
		}
	}
	retries := &retryCounter{}
	b.api = api.NewAgentClient(cfg.APIBase(), cfg.Token, slog.New(retries))
	b.api.HTTP = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	b.retries = retries
	x, err := b.api.Exchange(ctx)
	sr.Resent = int(retries.n.Swap(0))
	if err != nil {
		return err
	}
	if cfg.Machine != "" && x.MachineID != cfg.Machine {
		return fmt.Errorf("exchange answered machine %q, the command line says %q", x.MachineID, cfg.Machine)
	}
	b.res.MachineID = x.MachineID
	return nil
}

// task is the agent's second call.
func (b *boot) task(ctx context.Context, sr *StepResult) error {
	defer b.api.HTTP.CloseIdleConnections()
	t, err := b.api.Task(ctx)
	sr.Resent = int(b.retries.n.Swap(0))
	if err != nil {
		return err
	}
	if t.MachineID != b.res.MachineID {
		return fmt.Errorf("task is for machine %q, the credential is %q's", t.MachineID, b.res.MachineID)
	}
	if t.Mode == "" {
		return fmt.Errorf("task for %s has no mode", t.MachineID)
	}
	sr.Note = string(t.Mode)
	return nil
}

// retryCounter is the agent client's logger: it counts the client's
// retries (the debug record it writes before each) and drops the rest.
type retryCounter struct{ n atomic.Int64 }

func (c *retryCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *retryCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "agent api retry" {
		c.n.Add(1)
	}
	return nil
}
func (c *retryCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *retryCounter) WithGroup(string) slog.Handler      { return c }
