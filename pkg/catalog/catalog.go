// Package catalog is the set of recipes a running server serves: loaded
// from the recipes folder, linted, and swapped whole when the folder
// changes or the process gets SIGHUP. A folder that does not lint keeps the
// recipes in force and logs every problem as file:line, so a bad pull
// request never takes a recipe away from a running fleet. A file over
// recipe.MaxFileSize, or one that is not a regular file, is such a
// problem, found from its stat without reading it. Jobs keep the recipe
// they started with (the engine pins it in the job), so a reload changes
// only what starts afterwards.
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Config builds a Catalog.
type Config struct {
	Dir string // the recipes folder; "" serves no recipes
	// Every is how often the folder is checked for changes (default 2 s;
	// negative: never, only on Reload or a signal).
	Every time.Duration
	// Reload, when it delivers, reloads at once (cmd/ingot sends SIGHUP).
	Reload <-chan os.Signal
	Logger *slog.Logger
}

// Catalog serves the recipes in force. Safe for concurrent use.
type Catalog struct {
	cfg     Config
	current atomic.Pointer[snapshot]
}

// snapshot is one loaded folder.
type snapshot struct {
	set   *recipe.Set
	stamp string // what the folder looked like: names, sizes, times
}

// New loads dir; a folder that does not lint is an error here, since
// there are no recipes in force to keep.
func New(cfg Config) (*Catalog, error) {
	if cfg.Every == 0 {
		cfg.Every = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Catalog{cfg: cfg}
	if cfg.Dir == "" {
		c.current.Store(&snapshot{})
		return c, nil
	}
	snap, err := load(cfg.Dir)
	if err != nil {
		return nil, err
	}
	c.current.Store(snap)
	return c, nil
}

// Get returns the named recipe in force (extends resolved).
func (c *Catalog) Get(name string) (*recipe.Recipe, error) {
	snap := c.current.Load()
	if snap.set == nil {
		return nil, fmt.Errorf("recipe %s: no --recipes folder configured", name)
	}
	r, ok := snap.set.Get(name)
	if !ok {
		return nil, fmt.Errorf("recipe %s: not in %s (have %v)", name, c.cfg.Dir, snap.set.Names())
	}
	return r, nil
}

// Names lists the recipes in force.
func (c *Catalog) Names() []string {
	if snap := c.current.Load(); snap.set != nil {
		return snap.set.Names()
	}
	return nil
}

// Digests maps each recipe in force to its digest (recipe.Recipe.Digest):
// what instances sharing a store compare.
func (c *Catalog) Digests() map[string]string {
	snap := c.current.Load()
	if snap.set == nil {
		return map[string]string{}
	}
	out := map[string]string{}
	for _, n := range snap.set.Names() {
		r, _ := snap.set.Get(n)
		out[n] = r.Digest()
	}
	return out
}

// Reload loads the folder again; when it does not lint, the recipes in
// force stay and the error lists every problem as file:line.
func (c *Catalog) Reload() error {
	if c.cfg.Dir == "" {
		return nil
	}
	snap, err := load(c.cfg.Dir)
	if err != nil {
		c.cfg.Logger.Error("recipes not reloaded: the folder does not lint; the recipes in force stay", "dir", c.cfg.Dir, "err", err)
		return err
	}
	old := c.current.Swap(snap)
	c.cfg.Logger.Info("recipes reloaded", "dir", c.cfg.Dir, "recipes", len(snap.set.Names()), "changed", changed(old, snap))
	return nil
}

// Run reloads when the folder changes (checked every Config.Every) or a
// signal arrives, until ctx ends: a service of serve's supervisor.
func (c *Catalog) Run(ctx context.Context) error {
	var tick <-chan time.Time
	if c.cfg.Every > 0 && c.cfg.Dir != "" {
		t := time.NewTicker(c.cfg.Every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Reload:
			_ = c.Reload()
		case <-tick:
			if stamp, err := folderStamp(c.cfg.Dir); err == nil && stamp != c.current.Load().stamp {
				_ = c.Reload()
			}
		}
	}
}

func load(dir string) (*snapshot, error) {
	stamp, err := folderStamp(dir)
	if err != nil {
		return nil, err
	}
	set, diags := recipe.LoadDir(dir)
	var errs []string
	for _, d := range diags {
		if d.Severity == recipe.SeverityError {
			errs = append(errs, d.String())
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading recipes from %s:\n%s", dir, strings.Join(errs, "\n"))
	}
	return &snapshot{set: set, stamp: stamp}, nil
}

// folderStamp summarises the recipe files of dir (names, sizes, times), so
// a change to any of them, an added or a removed one, changes it.
func folderStamp(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading recipes folder: %w", err)
	}
	var lines []string
	for _, e := range ents {
		if ext := filepath.Ext(e.Name()); ext != ".yaml" && ext != ".yml" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return "", err
		}
		lines = append(lines, fmt.Sprintf("%s %d %d", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:]), nil
}

// changed names the recipes a reload added, removed or changed.
func changed(old, cur *snapshot) []string {
	var out []string
	was := map[string]string{}
	if old != nil && old.set != nil {
		for _, n := range old.set.Names() {
			r, _ := old.set.Get(n)
			was[n] = r.Digest()
		}
	}
	for _, n := range cur.set.Names() {
		r, _ := cur.set.Get(n)
		if d, ok := was[n]; !ok || d != r.Digest() {
			out = append(out, n)
		}
		delete(was, n)
	}
	for n := range was {
		out = append(out, n+" (removed)")
	}
	sort.Strings(out)
	return out
}
