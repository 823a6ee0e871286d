package httpboot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
)

// TokenIssuer issues the one-time token a booting agent presents to the API.
// The engine/API implements it; StoreTokens is a simple implementation.
type TokenIssuer interface {
	IssueMachineToken(ctx context.Context, machineID string) (string, error)
}

// TokenPutter is the part of the store StoreTokens needs.
type TokenPutter interface {
	PutToken(ctx context.Context, t store.Token) error
}

// StoreTokens issues random tokens and stores only their SHA-256, with scope
// "machine:<id>". Making them one-time (revoking on first use) is the API's
// job when it checks them.
type StoreTokens struct {
	Store TokenPutter
	TTL   time.Duration // zero: 1h
	Now   func() time.Time
}

// IssueMachineToken implements TokenIssuer.
func (s StoreTokens) IssueMachineToken(ctx context.Context, machineID string) (string, error) {
	var secret, id [16]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", err
	}
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ttl := s.TTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	tok := hex.EncodeToString(secret[:])
	h := sha256.Sum256([]byte(tok))
	t := store.Token{
		ID:      hex.EncodeToString(id[:8]),
		Name:    "boot:" + machineID,
		Hash:    hex.EncodeToString(h[:]),
		Scope:   "machine:" + machineID,
		Created: now().UTC(),
		Expires: now().UTC().Add(ttl),
	}
	if err := s.Store.PutToken(ctx, t); err != nil {
		return "", fmt.Errorf("storing boot token for machine %s: %w", machineID, err)
	}
	return tok, nil
}
