package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/durable"

	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/store"
)

// bootstrapTTL is the first token's lifetime: long enough to make your
// own (ingot token create), short enough not to linger.
const bootstrapTTL = 7 * 24 * time.Hour

// bootstrapToken gives a fresh server its first operator token: when the
// database holds none, it creates one named admin and writes its secret to
// DATA/admin.token (0600, readable by root only), the file the CLI reads
// when nothing else names a token. It lives bootstrapTTL. Later starts
// leave everything as it is while a live operator token exists; once none
// does (all expired or revoked), the next start writes a new one there.
func bootstrapToken(ctx context.Context, st store.Store, data string, log *slog.Logger) error {
	toks, err := st.ListTokens(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	for _, t := range toks {
		if fleet.ValidScope(t.Scope) && (t.Expires.IsZero() || time.Now().Before(t.Expires)) {
			return nil
		}
	}
	path := filepath.Join(data, wire.BootstrapTokenFile)
	secret, t, err := fleet.CreateToken(ctx, st, "admin", fleet.ScopeOperator, bootstrapTTL, time.Now())
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	// Whole or not at all: the CLI (or the lab) may read the file while it
	// is written. A token nobody can read is deleted again.
	if err := durable.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		if derr := st.DeleteToken(ctx, t.Hash); derr != nil {
			err = errors.Join(err, derr)
		}
		return fmt.Errorf("bootstrap token: writing %s: %w", path, err)
	}
	log.Warn("first start: an operator token was created; its secret is in the file (root only). Make your own with 'ingot token create NAME' and delete the file",
		"token", t.ID, "file", path)
	return nil
}
