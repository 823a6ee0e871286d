package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/backends"
)

// adminMigrate copies a stopped install into an empty store and checks it
// (backends.Migrate).
func adminMigrate(ctx context.Context, e *env, from, to string, pos []string) error {
	if from == "" || to == "" || len(pos) > 0 {
		fmt.Fprint(e.stderr, adminUsage)
		return errUsage
	}
	start := time.Now()
	m, err := backends.Migrate(ctx, from, to, store.Options{Timeout: 200 * time.Millisecond})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("admin migrate: %s is held by a running ingot server: stop it first (a migration copies a stopped install)", store.Redact(from))
	}
	if err != nil {
		return fmt.Errorf("admin migrate: %w", err)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m.Records)) {
		parts = append(parts, fmt.Sprintf("%d %s", m.Records[k], k))
	}
	if m.Done {
		fmt.Fprintf(e.stdout, "%s already holds the %d records of %s (%s): nothing to do\n", store.Redact(to), m.Total(), store.Redact(from), strings.Join(parts, ", "))
		return nil
	}
	fmt.Fprintf(e.stdout, "copied %d records from %s to %s in %s and compared every one (%s)\n",
		m.Total(), store.Redact(from), store.Redact(to), time.Since(start).Round(time.Millisecond), strings.Join(parts, ", "))
	fmt.Fprintln(e.stdout, "Start ingot serve with --db", store.Redact(to), "and the same --secret-key-file: the sealed secrets open only with it.")
	return nil
}
