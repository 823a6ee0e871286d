package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/backends"
)

// Where `ingot serve` keeps its data by default, and the file it writes
// the first operator token into on its first start.
const (
	defaultServeData = "/var/lib/ingot"
	defaultStorePath = defaultServeData + "/ingot.db"
)

const adminUsage = `Usage: ingot admin COMMAND [--db STORE]

Offline administration, directly on the store, for when no server runs:
every other command talks to a running server. A server holds a bbolt
file while it runs, and admin says so at once instead of waiting.

  token create NAME [--scope operator|read-only] [--ttl 720h]
                 the first operator token, before the server starts
  token ls       operator tokens
  token revoke ID
  check          the file's consistency (every page, every record); exit 1 on damage
  machine ls     machines as the database holds them
  events NODE    a machine's events
  restore FILE   replace the database with a backup (ingot backup, or the
                 PATH.schema-vN-TIME copy a newer ingot kept before it migrated
                 the store: the way back to an older ingot), keeping the current
                 file as PATH.before-restore-TIME; the backup is checked first,
                 and a damaged one changes nothing (an etcd store is restored
                 only into an empty prefix)
  migrate --from STORE --to STORE
                 copy a stopped install into an empty store (bolt:///var/lib/ingot/ingot.db
                 to etcd://h1:2379,h2:2379,h3:2379/ingot) and check it record by
                 record; a second run does nothing, a target holding other
                 records is refused

--db STORE (INGOT_DB): a path or bolt:///PATH (default ` + defaultStorePath + `),
or any store URL serve takes; -o table|json|yaml.
`

// runAdmin dispatches `ingot admin`.
func runAdmin(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(e.stderr, adminUsage)
		return errUsage
	}
	fs := e.flagSet("admin "+args[0], "admin "+args[0]+" ... [--db PATH]")
	db := fs.String("db", defaultStorePath, "the store: a bbolt file path or a store URL (bolt:///PATH, etcd://HOST:2379,HOST:2379/PREFIX)")
	output := fs.String("o", "table", "output format: table, json or yaml")
	scope := fs.String("scope", fleet.ScopeOperator, "token scope: operator or read-only")
	ttl := fs.Duration("ttl", 0, "token lifetime (0: until revoked)")
	from := fs.String("from", "", "admin migrate: the store to copy (a stopped install's)")
	to := fs.String("to", "", "admin migrate: the empty store to copy it into")
	pos, err := parseWithArgs(e, fs, args[1:])
	if err != nil {
		return helpOK(err)
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if args[0] == "restore" {
		return adminRestore(ctx, e, *db, pos)
	}
	if args[0] == "migrate" {
		return adminMigrate(ctx, e, *from, *to, pos)
	}
	st, err := openOffline(ctx, *db, args[0] == "token" && len(pos) > 0 && pos[0] == "create")
	if err != nil {
		return fmt.Errorf("admin %s: %w", args[0], err)
	}
	defer st.Close()
	f, err := fleet.New(fleet.Config{Store: st, Recipes: noRecipes})
	if err != nil {
		return err
	}
	cmd := strings.Join(append([]string{args[0]}, pos...), " ")
	switch {
	case args[0] == "token" && len(pos) == 2 && pos[0] == "create":
		return adminTokenCreate(ctx, e, f, filepath.Dir(*db), pos[1], *scope, *ttl)
	case cmd == "token ls":
		toks, err := f.Tokens(ctx)
		if err != nil {
			return err
		}
		return e.render(*output, toks, func() error { return writeTokens(e, wireTokens(toks)) })
	case args[0] == "token" && len(pos) == 2 && pos[0] == "revoke":
		return f.RevokeToken(ctx, pos[1], operatorActor(e))
	case cmd == "check":
		if err := st.Check(ctx); err != nil {
			return fmt.Errorf("admin check %s: %w", *db, err)
		}
		fmt.Fprintf(e.stdout, "%s: consistent (every page and record read)\n", *db)
		return nil
	case cmd == "machine ls":
		ms, err := f.List(ctx, store.MachineFilter{})
		if err != nil {
			return err
		}
		return e.render(*output, ms, func() error { return writeMachineTable(e, ms) })
	case args[0] == "events" && len(pos) == 1:
		evs, err := f.Events(ctx, pos[0], 0, 0)
		if err != nil {
			return err
		}
		return e.render(*output, evs, func() error { return writeEvents(e.stdout, evs) })
	}
	fmt.Fprint(e.stderr, adminUsage)
	return errUsage
}

// adminRestore puts a backup in place of the (stopped) server's store.
func adminRestore(ctx context.Context, e *env, db string, pos []string) error {
	if len(pos) != 1 {
		fmt.Fprint(e.stderr, adminUsage)
		return errUsage
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("admin restore: %w", err)
	}
	defer f.Close()
	kept, err := backends.Registry().Restore(ctx, db, f, store.Options{Timeout: 200 * time.Millisecond})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("admin restore: database %s is held by a running ingot server: stop it first (a restore replaces the file under it)", db)
	}
	if err != nil {
		return fmt.Errorf("admin restore: %w", err)
	}
	fmt.Fprintf(e.stdout, "restored %s from %s", db, pos[0])
	if kept != "" {
		fmt.Fprintf(e.stdout, "; the previous file is %s", kept)
	}
	fmt.Fprintln(e.stdout, "\nIts sealed secrets open only with the secret key file the backup was taken with (ingot backup printed its ID).")
	return nil
}

// openOffline opens the store for admin, by its URL through the backend
// registry: a bbolt file a server holds is an error at once (no 5 s
// wait); a missing file is created only when asked (the first token,
// before the server's first start).
func openOffline(ctx context.Context, location string, create bool) (store.Store, error) {
	if path, ok := boltPath(location); ok {
		if _, err := os.Stat(path); err != nil && !create {
			return nil, fmt.Errorf("database %s: %w (set --db or INGOT_DB)", path, err)
		}
		if create {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, err
			}
		}
	}
	st, err := backends.Open(ctx, location, store.Options{Timeout: 200 * time.Millisecond})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("database %s is held by a running ingot server: use the API instead (ingot --server URL ...; ingot token create), or stop the server first", location)
	}
	return st, err
}

func adminTokenCreate(ctx context.Context, e *env, f *fleet.Service, dir, name, scope string, ttl time.Duration) error {
	secret, t, err := f.CreateToken(ctx, name, scope, ttl, operatorActor(e))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "token %s (%s, %s) created in %s; it is shown once:\n", t.ID, t.Name, t.Scope, dir)
	fmt.Fprintln(e.stdout, secret)
	return nil
}

// noRecipes: admin changes no recipe assignment.
func noRecipes(name string) (*recipe.Recipe, error) {
	return nil, fmt.Errorf("recipe %s: admin mode reads no recipes (use the server)", name)
}

// operatorActor is the actor admin records: the local user.
func operatorActor(e *env) string {
	if u := e.getenv("USER"); u != "" {
		return "admin:" + u
	}
	return "admin:unknown"
}

func wireTokens(toks []store.Token) []wire.Token {
	out := make([]wire.Token, 0, len(toks))
	for _, t := range toks {
		out = append(out, wire.Token{ID: t.ID, Name: t.Name, Scope: t.Scope, Created: t.Created, Expires: t.Expires})
	}
	return out
}
