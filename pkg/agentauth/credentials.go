package agentauth

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// IssueBoot gives the machine booting from addr with mac its boot
// credential for jobID ("" for a machine with no job: the credential then
// expires after DiscoveryTTL). It deletes every earlier credential of the
// job (a new boot attempt) and refuses, with ErrNotTied, a requester whose
// address is not tied to mac; under first-use binding, a second address in
// one boot attempt.
func (a *Auth) IssueBoot(ctx context.Context, machineID, mac, jobID string, addr netip.Addr) (string, error) {
	addr = addr.Unmap()
	if err := a.Tie(ctx, mac, addr); err != nil {
		return "", err
	}
	old, err := a.credentials(ctx, machineID, jobID)
	if err != nil {
		return "", err
	}
	if a.cfg.Binding == BindFirstUse {
		for _, t := range old {
			if t.Kind == KindBoot && t.Address != addr.String() {
				return "", fmt.Errorf("%w: this boot attempt was bound at first use to %s", ErrNotTied, t.Address)
			}
		}
	}
	if err := a.delete(ctx, old); err != nil {
		return "", err
	}
	secret, t, err := a.put(ctx, KindBoot, machineID, jobID, addr.String(), "")
	if err != nil {
		return "", err
	}
	a.log.Info("boot credential issued", "machine", machineID, "job", jobID, "address", addr, "credential", t.ID)
	return secret, nil
}

// Exchange trades a boot credential, presented from addr, for an agent
// credential bound to addr. Repeating it from the same address replaces the
// agent credential given before; from another address it is refused with
// ErrForeign and a security event.
func (a *Auth) Exchange(ctx context.Context, bootSecret string, addr netip.Addr) (string, *store.Token, error) {
	addr = addr.Unmap()
	boot, err := a.lookup(ctx, bootSecret)
	if err != nil {
		return "", nil, err
	}
	if boot.Kind != KindBoot {
		return "", nil, fmt.Errorf("%w: exchange takes the boot credential of the iPXE script, not a %s credential", ErrWrongKind, kindName(boot.Kind))
	}
	if boot.Address != addr.String() {
		return "", nil, a.foreign(ctx, boot, addr, "exchange")
	}
	toks, err := a.cfg.Store.FindTokens(ctx, store.TokenFilter{Scope: boot.Scope})
	if err != nil {
		return "", nil, fmt.Errorf("listing credentials: %w", err)
	}
	var earlier []store.Token
	for _, t := range toks {
		if t.Kind == KindAgent && t.Parent == boot.ID {
			earlier = append(earlier, t)
		}
	}
	if err := a.delete(ctx, earlier); err != nil {
		return "", nil, err
	}
	secret, t, err := a.put(ctx, KindAgent, machineOf(boot), boot.JobID, addr.String(), boot.ID)
	if err != nil {
		return "", nil, err
	}
	t.Expires = boot.Expires
	return secret, &t, nil
}

// IssueFirstBoot makes the job's first-boot credential (replacing an earlier
// one): the agent writes it into the installed system.
func (a *Auth) IssueFirstBoot(ctx context.Context, machineID, jobID string) (string, error) {
	old, err := a.credentials(ctx, machineID, jobID)
	if err != nil {
		return "", err
	}
	var fb []store.Token
	for _, t := range old {
		if t.Kind == KindFirstBoot {
			fb = append(fb, t)
		}
	}
	if err := a.delete(ctx, fb); err != nil {
		return "", err
	}
	secret, _, err := a.put(ctx, KindFirstBoot, machineID, jobID, "", "")
	return secret, err
}

// Authenticate checks a credential presented from addr for a request that
// takes the given kinds. An agent credential must come from its address; a
// first-boot credential from an address tied to one of the machine's MACs.
// A use from elsewhere is refused with ErrForeign and a security event.
func (a *Auth) Authenticate(ctx context.Context, secret string, addr netip.Addr, kinds ...string) (*store.Token, error) {
	addr = addr.Unmap()
	t, err := a.lookup(ctx, secret)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(kinds, t.Kind) {
		hint := ""
		if t.Kind == KindBoot {
			hint = ": exchange it first (POST /api/v1/agent/exchange)"
		}
		return nil, fmt.Errorf("%w: a %s credential does not open this request%s", ErrWrongKind, kindName(t.Kind), hint)
	}
	switch {
	case t.Address != "":
		if t.Address != addr.String() {
			return nil, a.foreign(ctx, t, addr, "use")
		}
	case t.Kind == KindFirstBoot:
		if err := a.tiedToMachine(ctx, machineOf(t), addr); err != nil {
			_ = a.foreign(ctx, t, addr, "first boot")
			return nil, err
		}
	}
	return t, nil
}

// DeleteJob deletes every credential issued for the job.
func (a *Auth) DeleteJob(ctx context.Context, jobID string) error {
	if jobID == "" {
		return nil
	}
	toks, err := a.cfg.Store.FindTokens(ctx, store.TokenFilter{JobID: jobID})
	if err != nil {
		return fmt.Errorf("listing credentials: %w", err)
	}
	return a.delete(ctx, toks)
}

// MachineID returns the machine a credential speaks for.
func MachineID(t *store.Token) string { return machineOf(t) }

func machineOf(t *store.Token) string { return strings.TrimPrefix(t.Scope, ScopePrefix) }

func kindName(k string) string {
	if k == "" {
		return "legacy"
	}
	return k
}

func (a *Auth) tiedToMachine(ctx context.Context, machineID string, addr netip.Addr) error {
	m, err := a.cfg.Store.GetMachine(ctx, machineID)
	if err != nil {
		return fmt.Errorf("%w: machine %s: %v", ErrNotTied, machineID, err)
	}
	var why []string
	for _, mac := range m.MACs {
		n, err := machine.NormalizeMAC(mac)
		if err != nil {
			continue
		}
		err = a.Tie(ctx, n, addr)
		if err == nil {
			return nil
		}
		why = append(why, err.Error())
	}
	if len(why) == 0 {
		return fmt.Errorf("%w: machine %s has no MAC", ErrNotTied, m.Name)
	}
	return errors.New(strings.Join(why, "; "))
}

// lookup finds a live machine credential by its secret.
func (a *Auth) lookup(ctx context.Context, secret string) (*store.Token, error) {
	t, err := a.cfg.Store.TokenByHash(ctx, Hash(strings.TrimSpace(secret)))
	if err != nil {
		return nil, ErrUnknown
	}
	switch {
	case !strings.HasPrefix(t.Scope, ScopePrefix):
		return nil, fmt.Errorf("%w: not a machine credential", ErrWrongKind)
	case t.Revoked:
		return nil, fmt.Errorf("%w: credential %s was revoked", ErrUnknown, t.ID)
	case !t.Expires.IsZero() && a.now().After(t.Expires):
		return nil, fmt.Errorf("%w: credential %s expired at %s", ErrUnknown, t.ID, t.Expires.Format(time.RFC3339))
	}
	if t.JobID != "" {
		j, err := a.cfg.Store.GetJob(ctx, t.JobID)
		if err != nil || j.State != store.JobRunning {
			return nil, fmt.Errorf("%w: credential %s ended with its job %s", ErrUnknown, t.ID, t.JobID)
		}
	}
	return t, nil
}

// credentials lists the machine's credentials of jobID ("" : those with no job).
func (a *Auth) credentials(ctx context.Context, machineID, jobID string) ([]store.Token, error) {
	toks, err := a.cfg.Store.FindTokens(ctx, store.TokenFilter{Scope: ScopePrefix + machineID})
	if err != nil {
		return nil, fmt.Errorf("listing credentials: %w", err)
	}
	var out []store.Token
	for _, t := range toks {
		if t.Kind != "" && t.JobID == jobID {
			out = append(out, t)
		}
	}
	return out, nil
}

func (a *Auth) put(ctx context.Context, kind, machineID, jobID, addr, parent string) (string, store.Token, error) {
	prefix := map[string]string{KindBoot: "mb_", KindAgent: "ma_", KindFirstBoot: "mf_"}[kind]
	secret, err := newSecret(prefix)
	if err != nil {
		return "", store.Token{}, err
	}
	now := a.now()
	t := store.Token{
		ID: prefix + Hash(secret)[:10], Name: kind + " " + machineID, Hash: Hash(secret), Scope: ScopePrefix + machineID,
		JobID: jobID, Kind: kind, Address: addr, Parent: parent, Created: now,
	}
	if jobID == "" {
		t.Expires = now.Add(a.cfg.DiscoveryTTL)
	}
	if err := a.cfg.Store.PutToken(ctx, t); err != nil {
		return "", t, fmt.Errorf("storing the %s credential of %s: %w", kind, machineID, err)
	}
	return secret, t, nil
}

func (a *Auth) delete(ctx context.Context, ts []store.Token) error {
	for _, t := range ts {
		if err := a.cfg.Store.DeleteToken(ctx, t.Hash); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("deleting credential %s: %w", t.ID, err)
		}
	}
	return nil
}

// foreign records a credential presented from the wrong address and returns
// the error for the caller.
func (a *Auth) foreign(ctx context.Context, t *store.Token, addr netip.Addr, what string) error {
	id := machineOf(t)
	bound := t.Address
	if bound == "" {
		bound = "the machine's own address"
	}
	msg := fmt.Sprintf("refused a %s of %s credential %s from %s: it is bound to %s", what, t.Kind, t.ID, addr, bound)
	a.log.Warn("security: credential from a foreign address", "machine", id, "job", t.JobID, "credential", t.ID, "address", addr, "bound", bound, "what", what)
	if a.cfg.Record != nil {
		a.cfg.Record(ctx, machine.Event{Machine: id, Time: a.now(), Actor: "agentauth", Kind: "security",
			Message: msg, Fields: map[string]string{"job": t.JobID, "address": addr.String(), "credential": t.ID}})
	}
	return fmt.Errorf("%w: %s", ErrForeign, msg)
}
