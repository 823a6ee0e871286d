package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/ingot-dev/ingot/pkg/journal"
)

// env carries what every subcommand needs: output streams and the process
// environment (injected so tests can run commands in-process).
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	journalSocket  string // journald's native socket; "" is journal.DefaultSocket (tests replace it)
}

// flagSet returns a FlagSet that prints its usage to stderr and whose flags
// may be preset from INGOT_* environment variables (see envDefaults).
func (e *env) flagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: ingot %s\n\nFlags (each also settable as INGOT_<FLAG>, dashes as underscores):\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args after applying INGOT_* defaults, so flags beat the
// environment and the environment beats built-in defaults.
func (e *env) parse(fs *flag.FlagSet, args []string) error {
	var bad error
	fs.VisitAll(func(f *flag.Flag) {
		key := "INGOT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := e.getenv(key); v != "" && bad == nil {
			if err := f.Value.Set(v); err != nil {
				bad = fmt.Errorf("environment %s=%q: %w", key, v, err)
			}
		}
	})
	if bad != nil {
		return bad
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return errHelp // usage printed; run ends the command successfully
		}
		return errUsage
	}
	return nil
}

// logger returns a text logger on stderr at the given level name, or,
// when stderr is the journal stream systemd gave the process (ingot.service),
// one writing each record to the journal with its attributes as fields
// (pkg/journal), the text logger taking what journald cannot.
func (e *env) logger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	text := slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l})
	if f, ok := e.stderr.(*os.File); ok && journal.IsStream(e.getenv("JOURNAL_STREAM"), f) {
		if h, err := journal.New(journal.Options{Socket: e.journalSocket, Identifier: "ingot", Level: l, Fallback: text}); err == nil {
			return slog.New(h)
		}
	}
	return slog.New(text)
}

// printJSON writes v as indented JSON to stdout.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
