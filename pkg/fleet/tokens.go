package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/tokenlife"
)

// Operator token scopes: an operator token may do everything the API
// offers; a read-only token may only read (GET).
const (
	ScopeOperator = "operator"
	ScopeReadOnly = "read-only"
)

// DefaultTokenTTL is how long an operator token lives when its creator
// names no lifetime: tokens expire by default, and expired ones are
// removed (SweepTokens, and at their first use after expiry).
const DefaultTokenTTL = 90 * 24 * time.Hour

// ValidScope reports whether s is an operator token scope.
func ValidScope(s string) bool { return s == ScopeOperator || s == ScopeReadOnly }

// NewSecret returns a fresh random token secret.
func NewSecret(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// CreateToken stores a new operator token and returns its secret, which is
// shown once and never stored (only its hash is). ttl 0: DefaultTokenTTL;
// at most a year (tokenlife.DefaultMax).
func CreateToken(ctx context.Context, s store.Store, name, scope string, ttl time.Duration, now time.Time) (string, store.Token, error) {
	return createToken(ctx, s, tokenlife.Policy{Default: DefaultTokenTTL}, name, scope, ttl, now)
}

func createToken(ctx context.Context, s store.Store, life tokenlife.Policy, name, scope string, ttl time.Duration, now time.Time) (string, store.Token, error) {
	if err := CheckName(name); err != nil {
		return "", store.Token{}, fmt.Errorf("token name: %w", err)
	}
	if scope == "" {
		scope = ScopeOperator
	}
	if !ValidScope(scope) {
		return "", store.Token{}, invalid("scope %q: expected %s or %s", scope, ScopeOperator, ScopeReadOnly)
	}
	ttl, err := life.Lifetime(ttl)
	if err != nil {
		return "", store.Token{}, invalid("%v", err)
	}
	secret := NewSecret("ingot_")
	h := agentauth.Hash(secret)
	t := store.Token{ID: "t-" + h[:10], Name: name, Hash: h, Scope: scope, Created: now, Expires: now.Add(ttl)}
	if err := s.PutToken(ctx, t); err != nil {
		return "", t, fmt.Errorf("storing token %s: %w", name, err)
	}
	return secret, t, nil
}

// CreateToken is CreateToken on the service's store, logged with its actor.
func (s *Service) CreateToken(ctx context.Context, name, scope string, ttl time.Duration, actor string) (string, store.Token, error) {
	secret, t, err := createToken(ctx, s.store, s.tokenLife, name, scope, ttl, s.now())
	if err == nil {
		s.log.Info("token created", "token", t.ID, "name", t.Name, "scope", t.Scope, "actor", actor)
	}
	return secret, t, err
}

// Tokens lists the operator tokens (machine credentials are agentauth's).
// Hashes are left out: they are no business of a client.
func (s *Service) Tokens(ctx context.Context) ([]store.Token, error) {
	all, err := s.store.ListTokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	out := []store.Token{}
	for _, t := range all {
		if ValidScope(t.Scope) {
			t.Hash = ""
			out = append(out, t)
		}
	}
	return out, nil
}

// RevokeToken deletes an operator token by ID: it stops working at once,
// without a restart. The log keeps who revoked it.
func (s *Service) RevokeToken(ctx context.Context, id, actor string) error {
	all, err := s.store.ListTokens(ctx)
	if err != nil {
		return fmt.Errorf("revoking token %s: %w", id, err)
	}
	for _, t := range all {
		if t.ID == id && ValidScope(t.Scope) {
			if err := s.store.DeleteToken(ctx, t.Hash); err != nil {
				return fmt.Errorf("revoking token %s: %w", id, err)
			}
			s.log.Info("token revoked", "token", id, "name", t.Name, "actor", actor)
			return nil
		}
	}
	return fmt.Errorf("revoking token %s: %w (see 'ingot token ls')", id, store.ErrNotFound)
}

// SweepTokens deletes every operator token that has expired and returns
// how many it deleted.
func (s *Service) SweepTokens(ctx context.Context) (int, error) {
	all, err := s.store.ListTokens(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweeping expired tokens: %w", err)
	}
	n := 0
	for _, t := range all {
		if ValidScope(t.Scope) && s.tokenLife.Ended(t.Created, t.Expires, s.now()) {
			if err := s.store.DeleteToken(ctx, t.Hash); err != nil {
				return n, fmt.Errorf("sweeping expired token %s: %w", t.ID, err)
			}
			s.log.Info("expired token removed", "token", t.ID, "name", t.Name, "expired", t.Expires)
			n++
		}
	}
	return n, nil
}
