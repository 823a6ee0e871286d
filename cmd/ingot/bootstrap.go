package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/store"
)

// bootstrapToken gives a fresh server its first operator token: when the
// database holds none, it creates one named admin and writes its secret to
// DATA/admin.token (0600, readable by root only), the file the CLI reads
// when nothing else names a token. Later starts leave everything as it is;
// an operator who removes every token (and the file) gets a new one.
func bootstrapToken(ctx context.Context, st store.Store, data string, log *slog.Logger) error {
	toks, err := st.ListTokens(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	for _, t := range toks {
		if fleet.ValidScope(t.Scope) {
			return nil
		}
	}
	path := filepath.Join(data, bootstrapTokenFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("bootstrap token: the database has no operator token but %s exists: remove it (its token is gone) or create one with 'ingot admin token create NAME' before starting", path)
	}
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	secret, t, err := fleet.CreateToken(ctx, st, "admin", fleet.ScopeOperator, 0, time.Now())
	if err == nil {
		_, err = fmt.Fprintln(f, secret)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("bootstrap token: %w", err)
	}
	log.Warn("first start: an operator token was created; its secret is in the file (root only). Make your own with 'ingot token create NAME' and delete the file",
		"token", t.ID, "file", path)
	return nil
}
