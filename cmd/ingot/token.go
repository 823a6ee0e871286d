package main

import (
	"context"
	"fmt"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// runToken: `ingot token create|ls|revoke`, through the API: revoking a
// leaked token needs no restart. The very first token comes from the
// server itself (it writes one into its data folder on its first start) or
// from `ingot admin token create` before it runs.
func runToken(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("token", "token create NAME [--scope operator|read-only] [--ttl 720h] | token ls | token revoke ID")
	af := addAPIFlags(fs)
	ttl := fs.Duration("ttl", 0, "token lifetime (0: the server's default, 90 days; at most its --token-max-ttl, 1 year unless set)")
	scope := fs.String("scope", "operator", "operator (everything) or read-only (GET only)")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) == 0 {
		fs.Usage()
		return errUsage
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("token %s: %w", pos[0], err)
	}
	switch {
	case pos[0] == "create" && len(pos) == 2:
		made, err := c.CreateToken(ctx, pos[1], *scope, *ttl)
		if err != nil {
			return fmt.Errorf("token create: %w", err)
		}
		fmt.Fprintf(e.stderr, "token %s (%s, %s) created; it is shown once:\n", made.Token.ID, made.Token.Name, made.Token.Scope)
		fmt.Fprintln(e.stdout, made.Secret)
		return nil
	case pos[0] == "ls" && len(pos) == 1:
		toks, err := c.Tokens(ctx)
		if err != nil {
			return fmt.Errorf("token ls: %w", err)
		}
		return e.render(af.output, toks, func() error { return writeTokens(e, toks) })
	case pos[0] == "revoke" && len(pos) == 2:
		if err := c.RevokeToken(ctx, pos[1]); err != nil {
			return fmt.Errorf("token revoke: %w", err)
		}
		fmt.Fprintf(e.stdout, "revoked %s\n", pos[1])
		return nil
	}
	fs.Usage()
	return errUsage
}

func writeTokens(e *env, toks []wire.Token) error {
	t := newCLITable(e.stdout, "ID", "NAME", "SCOPE", "CREATED", "EXPIRES")
	for _, k := range toks {
		exp := "never"
		if !k.Expires.IsZero() {
			exp = tableTime(k.Expires)
		}
		t.row(k.ID, k.Name, k.Scope, tableTime(k.Created), exp)
	}
	return t.flush()
}
