package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
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
	token     *fleet.Token // the machine credential presented
}

// remoteAddr is the IP a request came from.
func remoteAddr(r *http.Request) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("remote address %q: %w", r.RemoteAddr, err)
	}
	return ap.Addr().Unmap(), nil
}

// errUnauthorized: no credential, or one the server does not take (401).
var errUnauthorized = fleet.ErrUnauthorized

// authenticate resolves the request's bearer token: an operator token
// (the fleet's rules), or a machine credential of one of kinds presented
// from the address it is bound to (pkg/agentauth).
func (s *Server) authenticate(r *http.Request, kinds ...string) (principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		return principal{}, fmt.Errorf("%w: missing 'Authorization: Bearer TOKEN' header", errUnauthorized)
	}
	op, err := s.fleet.Authenticate(r.Context(), secret)
	switch {
	case errors.Is(err, fleet.ErrMachineCredential):
		from, _ := remoteAddr(r)
		mt, err := s.auth.Authenticate(r.Context(), secret, from, kinds...)
		if err != nil {
			return principal{}, err
		}
		return principal{machineID: agentauth.MachineID(mt), name: mt.Name, token: mt}, nil
	case err != nil:
		return principal{}, err
	}
	return principal{operator: true, readOnly: op.ReadOnly, name: op.Name}, nil
}
