package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Errors of Authenticate.
var (
	// ErrUnauthorized: the token is unknown, revoked, expired or of a scope
	// this server does not know. The message says which, never the secret.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrMachineCredential: the token is a machine's credential; check it
	// with pkg/agentauth, which knows where it may come from.
	ErrMachineCredential = errors.New("a machine credential")
)

// Operator is who an operator token speaks for.
type Operator struct {
	TokenID  string
	Name     string
	ReadOnly bool // a read-only token: reads only
}

// Authenticate resolves an operator token's secret. A revoked token, or
// one that expired (removed at this use), or one bound to a job that no
// longer runs, is refused with ErrUnauthorized naming why; a machine
// credential is answered ErrMachineCredential for agentauth to judge.
func (s *Service) Authenticate(ctx context.Context, secret string) (Operator, error) {
	t, err := s.store.TokenByHash(ctx, agentauth.Hash(strings.TrimSpace(secret)))
	if err != nil {
		return Operator{}, fmt.Errorf("%w: unknown token", ErrUnauthorized)
	}
	if strings.HasPrefix(t.Scope, agentauth.ScopePrefix) {
		return Operator{}, ErrMachineCredential
	}
	switch {
	case t.Revoked:
		return Operator{}, fmt.Errorf("%w: token %s was revoked", ErrUnauthorized, t.ID)
	case s.tokenLife.Ended(t.Created, t.Expires, s.now()):
		if err := s.store.DeleteToken(ctx, t.Hash); err == nil {
			s.log.Info("expired token removed at its use", "token", t.ID, "name", t.Name)
		}
		return Operator{}, fmt.Errorf("%w: token %s expired at %s", ErrUnauthorized, t.ID,
			s.tokenLife.EndsAt(t.Created, t.Expires).Format(time.RFC3339))
	}
	if t.JobID != "" {
		if j, err := s.store.GetJob(ctx, t.JobID); err != nil || j.State != store.JobRunning {
			return Operator{}, fmt.Errorf("%w: token %s expired with its job %s", ErrUnauthorized, t.ID, t.JobID)
		}
	}
	switch t.Scope {
	case ScopeOperator:
		return Operator{TokenID: t.ID, Name: t.Name}, nil
	case ScopeReadOnly:
		return Operator{TokenID: t.ID, Name: t.Name, ReadOnly: true}, nil
	}
	return Operator{}, fmt.Errorf("%w: token %s has unknown scope %q", ErrUnauthorized, t.ID, t.Scope)
}

// ByMAC returns the machine one of whose MACs is mac.
func (s *Service) ByMAC(ctx context.Context, mac string) (*machine.Machine, error) {
	return s.store.MachineByMAC(ctx, mac)
}
