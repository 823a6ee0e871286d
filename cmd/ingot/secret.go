package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// runSecret: `ingot secret set NAME | allow NAME | ls | rm NAME |
// rotate-key`, through the API: the server seals secrets in its store with
// a key kept in its own file, and only the server ever opens them, for a
// BMC endpoint the secret is bound to.
func runSecret(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("secret", "secret set NAME [--from-file F] [--endpoint URL]... (value from stdin) | secret allow NAME --endpoint URL | secret ls | secret rm NAME | secret rotate-key")
	af := addAPIFlags(fs)
	from := fs.String("from-file", "", "read the value from this file instead of stdin")
	var endpoints repeatedFlag
	fs.Var(&endpoints, "endpoint", "a BMC endpoint the secret may be sent to (repeat for more); set: bind it to exactly these "+
		"(without: a new secret is bound to the first BMC it is sent to); allow: let it also go there")
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
		return fmt.Errorf("secret %s: %w", pos[0], err)
	}
	switch {
	case pos[0] == "set" && len(pos) == 2:
		var r io.Reader = os.Stdin
		if *from != "" {
			f, err := os.Open(*from)
			if err != nil {
				return fmt.Errorf("secret set: %w", err)
			}
			defer f.Close()
			r = f
		}
		b, err := io.ReadAll(io.LimitReader(r, 64<<10))
		if err != nil {
			return fmt.Errorf("secret set: reading the value: %w", err)
		}
		if err := c.SetSecret(ctx, pos[1], string(b), endpoints...); err != nil {
			return fmt.Errorf("secret set: %w", err)
		}
		fmt.Fprintf(e.stdout, "secret %s sealed; reference it as secret:%s\n", pos[1], pos[1])
		if len(endpoints) == 0 {
			fmt.Fprintf(e.stdout, "it goes only to the BMC endpoint it is bound to: the first one it is sent to, unless it was bound before (secret ls shows where)\n")
		}
		return nil
	case pos[0] == "allow" && len(pos) == 2 && len(endpoints) == 1:
		if err := c.AllowSecret(ctx, pos[1], endpoints[0]); err != nil {
			return fmt.Errorf("secret allow: %w", err)
		}
		fmt.Fprintf(e.stdout, "secret %s may now also go to %s (an event on each machine using it there)\n", pos[1], endpoints[0])
		return nil
	case pos[0] == "ls" && len(pos) == 1:
		ss, err := c.Secrets(ctx)
		if err != nil {
			return fmt.Errorf("secret ls: %w", err)
		}
		return e.render(af.output, ss, func() error { return writeSecrets(e, ss) })
	case pos[0] == "rm" && len(pos) == 2:
		if err := c.DeleteSecret(ctx, pos[1]); err != nil {
			return fmt.Errorf("secret rm: %w", err)
		}
		fmt.Fprintf(e.stdout, "deleted %s\n", pos[1])
		return nil
	case pos[0] == "rotate-key" && len(pos) == 1:
		k, err := c.RotateSecretKey(ctx)
		if err != nil {
			return fmt.Errorf("secret rotate-key: %w", err)
		}
		fmt.Fprintf(e.stdout, "%d secrets sealed again with key %s; the old key is gone from the key file\n", k.Resealed, k.KeyID)
		return nil
	}
	fs.Usage()
	return errUsage
}

func writeSecrets(e *env, ss []wire.Secret) error {
	t := newCLITable(e.stdout, "NAME", "KEY", "UPDATED", "USED BY", "ENDPOINTS")
	for _, s := range ss {
		var to []string
		for _, b := range s.Endpoints {
			to = append(to, b.Endpoint+" ("+b.By+")")
		}
		if len(to) == 0 {
			to = []string{"(bound at its first use)"}
		}
		t.row(s.Name, s.KeyID, tableTime(s.Updated), strings.Join(s.UsedBy, ","), strings.Join(to, ","))
	}
	return t.flush()
}

// runBMCRotate: `ingot bmc rotate NODE...|--recipe R|--all`, through the
// API: the server, which holds the secrets, changes each BMC password.
func runBMCRotate(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("bmc rotate", "bmc rotate NODE... | --recipe R | --all")
	af := addAPIFlags(fs)
	rcp := fs.String("recipe", "", "every machine of this recipe with a secret: credential")
	all := fs.Bool("all", false, "every machine with a secret: credential")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if (len(pos) > 0) == (*rcp != "" || *all) || (*rcp != "" && *all) {
		fs.Usage()
		return errUsage
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("bmc rotate: %w", err)
	}
	res, err := c.RotateBMC(ctx, wire.BMCRotateRequest{Machines: pos, Recipe: *rcp, All: *all})
	if err != nil {
		return fmt.Errorf("bmc rotate: %w", err)
	}
	failed := 0
	if rerr := e.render(af.output, res, func() error {
		t := newCLITable(e.stdout, "MACHINE", "SECRET", "RESULT")
		for _, r := range res {
			out := "rotated: " + r.Message
			if !r.OK {
				out = "FAILED: " + r.Message
			}
			t.row(r.Machine, r.Secret, out)
		}
		return t.flush()
	}); rerr != nil {
		return rerr
	}
	for _, r := range res {
		if !r.OK {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("bmc rotate: %d of %d failed (their old passwords stay in use)", failed, len(res))
	}
	return nil
}
