package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Scopes of API tokens.
const (
	ScopeOperator      = "operator"
	scopeMachinePrefix = "machine:"
)

// HashToken returns the hex SHA-256 under which a token secret is stored.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewSecret returns a fresh random token secret.
func NewSecret(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// CreateOperatorToken stores a new operator token and returns its secret,
// which is shown once and never stored.
func CreateOperatorToken(ctx context.Context, s store.Store, name string, ttl time.Duration, now time.Time) (string, store.Token, error) {
	secret := NewSecret("ingot_")
	t := store.Token{ID: "t-" + HashToken(secret)[:10], Name: name, Hash: HashToken(secret), Scope: ScopeOperator, Created: now}
	if ttl > 0 {
		t.Expires = now.Add(ttl)
	}
	if err := s.PutToken(ctx, t); err != nil {
		return "", t, fmt.Errorf("storing token %s: %w", name, err)
	}
	return secret, t, nil
}

// IssueMachineToken creates the one-time token a machine's agent uses. It
// is bound to the machine's running job (if any) and stops working when that
// job ends; without a job (discovery) it lives for DiscoveryTTL.
func (s *Server) IssueMachineToken(ctx context.Context, machineID string) (string, error) {
	secret := NewSecret("m_")
	t := store.Token{
		ID: "mt-" + HashToken(secret)[:10], Name: "agent " + machineID, Hash: HashToken(secret),
		Scope: scopeMachinePrefix + machineID, Created: s.now(), Expires: s.now().Add(s.discoveryTTL),
	}
	if j, err := s.engine.ActiveJob(ctx, machineID); err == nil {
		t.JobID = j.ID
		t.Expires = time.Time{}
	}
	if err := s.store.PutToken(ctx, t); err != nil {
		return "", fmt.Errorf("issuing machine token for %s: %w", machineID, err)
	}
	return secret, nil
}

type principal struct {
	operator  bool
	machineID string
	name      string
}

var errUnauthorized = errors.New("unauthorized")

// authenticate resolves the request's bearer token.
func (s *Server) authenticate(r *http.Request) (principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		return principal{}, fmt.Errorf("%w: missing 'Authorization: Bearer TOKEN' header", errUnauthorized)
	}
	t, err := s.store.TokenByHash(r.Context(), HashToken(strings.TrimSpace(secret)))
	if err != nil {
		return principal{}, fmt.Errorf("%w: unknown token", errUnauthorized)
	}
	switch {
	case t.Revoked:
		return principal{}, fmt.Errorf("%w: token %s was revoked", errUnauthorized, t.ID)
	case !t.Expires.IsZero() && s.now().After(t.Expires):
		return principal{}, fmt.Errorf("%w: token %s expired at %s", errUnauthorized, t.ID, t.Expires.Format(time.RFC3339))
	}
	if t.JobID != "" {
		if j, err := s.store.GetJob(r.Context(), t.JobID); err != nil || j.State != store.JobRunning {
			return principal{}, fmt.Errorf("%w: token %s expired with its job %s", errUnauthorized, t.ID, t.JobID)
		}
	}
	if t.Scope == ScopeOperator {
		return principal{operator: true, name: t.Name}, nil
	}
	if id, ok := strings.CutPrefix(t.Scope, scopeMachinePrefix); ok {
		return principal{machineID: id, name: t.Name}, nil
	}
	return principal{}, fmt.Errorf("%w: token %s has unknown scope %q", errUnauthorized, t.ID, t.Scope)
}
