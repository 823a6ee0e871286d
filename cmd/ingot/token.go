package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/store"
)

// runToken: `ingot token create|ls|revoke`, directly on the database (the
// first token cannot come from the API it unlocks).
func runToken(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("token", "token create NAME [--ttl 720h] | token ls | token revoke ID")
	sf := addStoreCLIFlags(fs)
	ttl := fs.Duration("ttl", 0, "token lifetime (0: until revoked)")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) == 0 {
		fs.Usage()
		return errUsage
	}
	s, err := sf.open(pos[0] == "create")
	if err != nil {
		return err
	}
	defer s.Close()
	switch {
	case pos[0] == "create" && len(pos) == 2:
		secret, t, err := apiserver.CreateOperatorToken(ctx, s, pos[1], *ttl, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "token %s (%s) created; it is shown once:\n", t.ID, t.Name)
		fmt.Fprintln(e.stdout, secret)
		return nil
	case pos[0] == "ls" && len(pos) == 1:
		toks, err := s.ListTokens(ctx)
		if err != nil {
			return err
		}
		if sf.output == "json" {
			return e.printJSON(toks)
		}
		t := newCLITable(e.stdout, "ID", "NAME", "SCOPE", "CREATED", "EXPIRES", "REVOKED")
		for _, k := range toks {
			exp := "never"
			if !k.Expires.IsZero() {
				exp = tableTime(k.Expires)
			}
			t.row(k.ID, k.Name, k.Scope, tableTime(k.Created), exp, fmt.Sprint(k.Revoked))
		}
		return t.flush()
	case pos[0] == "revoke" && len(pos) == 2:
		toks, err := s.ListTokens(ctx)
		if err != nil {
			return err
		}
		for _, k := range toks {
			if k.ID == pos[1] {
				k.Revoked = true
				return s.PutToken(ctx, k)
			}
		}
		return fmt.Errorf("token %s: %w (see 'ingot token ls')", pos[1], store.ErrNotFound)
	}
	fs.Usage()
	return errUsage
}
