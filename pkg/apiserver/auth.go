package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// scopeMachinePrefix marks machine credentials (pkg/agentauth).
const scopeMachinePrefix = "machine:"

// HashToken returns the hex SHA-256 under which a token secret is stored.
func HashToken(secret string) string { return agentauth.Hash(secret) }

// IssueBootCredential gives a machine booting from the address from its
// boot credential for its running job (httpboot.TokenIssuer); agentauth
// refuses a requester whose address is not tied to mac.
func (s *Server) IssueBootCredential(ctx context.Context, m *machine.Machine, mac string, from netip.Addr) (string, error) {
	jobID := ""
	if j, err := s.engine.ActiveJob(ctx, m.ID); err == nil {
		jobID = j.ID
	}
	return s.auth.IssueBoot(ctx, m.ID, mac, jobID, from)
}

type principal struct {
	operator  bool
	readOnly  bool // a read-only operator token: GET only
	machineID string
	name      string
	token     *store.Token // the machine credential presented
}

// remoteAddr is the IP a request came from.
func remoteAddr(r *http.Request) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("remote address %q: %w", r.RemoteAddr, err)
	}
	return ap.Addr().Unmap(), nil
}

var errUnauthorized = errors.New("unauthorized")

// authenticate resolves the request's bearer token: an operator token, or
// a machine credential of one of kinds presented from the address it is
// bound to (pkg/agentauth).
func (s *Server) authenticate(r *http.Request, kinds ...string) (principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		return principal{}, fmt.Errorf("%w: missing 'Authorization: Bearer TOKEN' header", errUnauthorized)
	}
	t, err := s.store.TokenByHash(r.Context(), HashToken(strings.TrimSpace(secret)))
	if err != nil {
		return principal{}, fmt.Errorf("%w: unknown token", errUnauthorized)
	}
	if strings.HasPrefix(t.Scope, scopeMachinePrefix) {
		from, _ := remoteAddr(r)
		mt, err := s.auth.Authenticate(r.Context(), secret, from, kinds...)
		if err != nil {
			return principal{}, err
		}
		return principal{machineID: agentauth.MachineID(mt), name: mt.Name, token: mt}, nil
	}
	switch {
	case t.Revoked:
		return principal{}, fmt.Errorf("%w: token %s was revoked", errUnauthorized, t.ID)
	case !t.Expires.IsZero() && s.now().After(t.Expires):
		if err := s.store.DeleteToken(r.Context(), t.Hash); err == nil {
			s.log.Info("expired token removed at its use", "token", t.ID, "name", t.Name)
		}
		return principal{}, fmt.Errorf("%w: token %s expired at %s", errUnauthorized, t.ID, t.Expires.Format(time.RFC3339))
	}
	if t.JobID != "" {
		if j, err := s.store.GetJob(r.Context(), t.JobID); err != nil || j.State != store.JobRunning {
			return principal{}, fmt.Errorf("%w: token %s expired with its job %s", errUnauthorized, t.ID, t.JobID)
		}
	}
	switch t.Scope {
	case fleet.ScopeOperator:
		return principal{operator: true, name: t.Name}, nil
	case fleet.ScopeReadOnly:
		return principal{operator: true, readOnly: true, name: t.Name}, nil
	}
	return principal{}, fmt.Errorf("%w: token %s has unknown scope %q", errUnauthorized, t.ID, t.Scope)
}
