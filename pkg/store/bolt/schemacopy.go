package bolt

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/store"
)

// schemaCopyLayout is the time in a schema copy's name: sorts as it reads.
const schemaCopyLayout = "20060102T150405Z"

// schemaCopy writes the file as it is, at schema version, beside it as
// PATH.schema-vVERSION-TIME: one read transaction's snapshot into a
// temporary file, synced, renamed, the folder synced (durable.WriteWith).
// It returns the name.
func (b *Store) schemaCopy(version int) (string, error) {
	name := fmt.Sprintf("%s.schema-v%d-%s", b.path, version, b.opts.Now().UTC().Format(schemaCopyLayout))
	err := durable.WriteWith(name, 0o600, func(w io.Writer) error {
		return b.db.View(func(tx *bbolt.Tx) error {
			_, err := tx.WriteTo(w)
			return err
		})
	})
	return name, err
}

// schemaCopies lists the schema copies beside path of a version at most
// upTo, newest first (by the time in their names, then the version).
func schemaCopies(path string, upTo int) []string {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil
	}
	type copyName struct {
		name    string
		version int
		at      string
	}
	var out []copyName
	prefix := filepath.Base(path) + ".schema-v"
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		v, at, ok := strings.Cut(rest, "-")
		n, err := strconv.Atoi(v)
		if _, terr := time.Parse(schemaCopyLayout, at); !ok || err != nil || terr != nil || n > upTo {
			continue // a .tmp left by a crash, or not ours
		}
		out = append(out, copyName{filepath.Join(filepath.Dir(path), e.Name()), n, at})
	}
	slices.SortFunc(out, func(a, b copyName) int {
		if c := strings.Compare(b.at, a.at); c != 0 {
			return c
		}
		return b.version - a.version
	})
	names := make([]string, len(out))
	for i, c := range out {
		names[i] = c.name
	}
	return names
}

// newerSchema is the refusal of a file of schema have by a binary of
// schema want: both versions, and the way back, naming the newest copy a
// newer ingot kept before it migrated the file.
func newerSchema(path string, have, want int) error {
	msg := fmt.Sprintf("schema version %d is newer than this ingot understands (%d): a newer ingot migrated this file", have, want)
	if copies := schemaCopies(path, want); len(copies) > 0 {
		msg += fmt.Sprintf(". Run the newer ingot again, or go back to the copy it kept before migrating "+
			"(what changed since is lost): ingot admin restore --db %s %s", path, copies[0])
	} else {
		msg += fmt.Sprintf("; no copy %s.schema-vN-TIME with N <= %d is beside it: run the newer ingot, or restore a backup "+
			"taken with this version (ingot admin restore --db %s FILE)", path, want, path)
	}
	return fmt.Errorf("%s: %w", msg, store.ErrSchemaNewer)
}
