package apiserver

// What a machine's BMC logged, for evidence bundles: its event log (SEL)
// since the job started, and its serial console where it keeps one.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/evidence"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// Bounds of the BMC part of an evidence bundle.
const (
	// bmcEvidenceTimeout bounds the whole BMC part: a BMC that does not
	// answer must not hold the download past the CLI's 60 s (pkg/client).
	bmcEvidenceTimeout = 40 * time.Second
	evidenceSELMax     = 1000    // event log entries, the newest
	evidenceConsoleMax = 1 << 20 // bytes of serial console, the last
	// selSlack takes entries from a little before the job started: the
	// BMC's clock is not the server's.
	selSlack = time.Minute
)

// BMCLogReader reads what a BMC logged; *bmc.Client is one.
type BMCLogReader interface {
	// EventLog returns the entries created at or after since, oldest
	// first, at most max (the newest).
	EventLog(ctx context.Context, since time.Time, max int) ([]bmc.LogEntry, error)
	// SerialConsole returns the last maxBytes of the host's serial
	// console; a BMC that keeps none fails with bmc.ErrNoConsole.
	SerialConsole(ctx context.Context, maxBytes int) ([]byte, error)
	Close() error
}

// DialBMCLogs opens a machine's BMC to read its logs.
type DialBMCLogs func(ctx context.Context, m *machine.Machine) (BMCLogReader, error)

// BMCLogsDialer dials a machine's BMC with the credentials its reference
// names, where creds allows (fleet.Service.Credentials, so secret:
// references open), with timeouts short enough for a download an operator
// waits for.
func BMCLogsDialer(creds func() credential.Policy, log *slog.Logger) DialBMCLogs {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, m *machine.Machine) (BMCLogReader, error) {
		user, pass, err := creds().Resolve(m)
		if err != nil {
			return nil, fmt.Errorf("machine %s: %w", m.Name, err)
		}
		c, err := bmc.Dial(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass, Insecure: m.BMC.Insecure,
			ConnectTimeout: 10 * time.Second, ReadTimeout: 20 * time.Second, Retries: 1, RetryWait: time.Second,
			Logger: log.With("bmc", m.BMC.Endpoint)})
		if err != nil {
			return nil, err // not c: a nil *bmc.Client in the interface would not be nil
		}
		return c, nil
	}
}

// bmcEvidence reads m's BMC event log since since and its serial console
// into b; what it cannot read, and why, goes to b.Missing.
func (s *Server) bmcEvidence(ctx context.Context, m *machine.Machine, since time.Time, b *evidence.Bundle) {
	both := "the BMC's event log (SEL) and serial console of " + m.Name
	switch {
	case s.dialBMCLogs == nil:
		b.Missing = append(b.Missing, both+": not collected: this server was started without BMC access for evidence")
		return
	case m.BMC.Endpoint == "":
		b.Missing = append(b.Missing, both+": the machine has no BMC endpoint")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, bmcEvidenceTimeout)
	defer cancel()
	c, err := s.dialBMCLogs(ctx, m)
	if err != nil {
		b.Missing = append(b.Missing, fmt.Sprintf("%s: %s: %v", both, bmcFailure(err), err))
		return
	}
	defer func() {
		if err := c.Close(); err != nil {
			s.log.Warn("evidence: closing the BMC session", "machine", m.Name, "err", err)
		}
	}()
	if entries, err := c.EventLog(ctx, since, evidenceSELMax); err != nil {
		b.Missing = append(b.Missing, fmt.Sprintf("the BMC's event log (SEL) of %s: %s: %v", m.Name, bmcFailure(err), err))
	} else {
		b.EventLog = &evidence.EventLog{BMC: m.BMC.Endpoint, Since: since, Entries: entries}
	}
	con, err := c.SerialConsole(ctx, evidenceConsoleMax)
	switch {
	case errors.Is(err, bmc.ErrNoConsole):
		b.Missing = append(b.Missing, "serial console of "+m.Name+": the BMC offers none (Redfish has no standard serial console log; "+
			"ingot reads OpenBMC's HostLogger log service, which this BMC lacks)")
	case err != nil:
		b.Missing = append(b.Missing, fmt.Sprintf("serial console of %s: %s: %v", m.Name, bmcFailure(err), err))
	case len(con) == 0:
		b.Missing = append(b.Missing, "serial console of "+m.Name+": empty: the BMC kept no output of the host")
	default:
		b.Console = con
	}
}

// bmcFailure names what kind of failure err is, for people.
func bmcFailure(err error) string {
	switch {
	case bmc.IsKind(err, bmc.KindUnreachable), bmc.IsKind(err, bmc.KindTimeout):
		return "BMC unreachable"
	case bmc.IsKind(err, bmc.KindAuth):
		return "BMC login refused"
	case bmc.IsKind(err, bmc.KindBusy):
		return "BMC busy"
	case errors.Is(err, credential.ErrRefused):
		return "no usable BMC credentials"
	}
	return "not read"
}
