package store

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Backend is one way of keeping a Store, selected by a URL scheme.
//
// Open MUST open (creating where the backend creates) the store u names
// and name u without its credentials in its errors; Restore, where the
// backend has one, MUST replace the store u names with a backup (the
// format of Maintainer.Backup), refusing while a server holds it, and say
// where it kept what it replaced ("" for nowhere).
type Backend struct {
	Scheme  string
	Open    func(ctx context.Context, u *url.URL, opts Options) (Store, error)
	Restore func(ctx context.Context, u *url.URL, src io.Reader, opts Options) (kept string, err error)
	// Example is a URL of this backend for error messages.
	Example string
}

// Registry is the backends a binary is built with (pkg/store/backends
// lists them: a new backend is one line there).
type Registry struct {
	backends map[string]Backend
	plain    string
}

// NewRegistry makes a registry of backends; a location without a scheme
// (a plain file path) names a store of the backend with scheme plain.
func NewRegistry(plain string, backends ...Backend) *Registry {
	r := &Registry{backends: map[string]Backend{}, plain: plain}
	for _, b := range backends {
		r.backends[b.Scheme] = b
	}
	return r
}

// urlScheme matches the start of a URL ("bolt://", "etcd://"); anything
// else is a plain file path, colons and all.
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// Open opens the store location names: a URL whose scheme selects the
// backend (bolt:///var/lib/ingot/ingot.db, etcd://h1:2379,h2:2379/site),
// or a plain path for the plain backend.
func (r *Registry) Open(ctx context.Context, location string, opts Options) (Store, error) {
	u, b, err := r.parse(location)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", Redact(location), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", Redact(location), err)
	}
	return b.Open(ctx, u, opts)
}

// Restore replaces the store location names with the backup src.
func (r *Registry) Restore(ctx context.Context, location string, src io.Reader, opts Options) (string, error) {
	u, b, err := r.parse(location)
	if err != nil {
		return "", fmt.Errorf("restoring store %s: %w", Redact(location), err)
	}
	if b.Restore == nil {
		return "", fmt.Errorf("restoring store %s: the %s backend cannot restore a backup", Redact(location), b.Scheme)
	}
	return b.Restore(ctx, u, src, opts)
}

func (r *Registry) parse(location string) (*url.URL, Backend, error) {
	if location == "" {
		return nil, Backend{}, fmt.Errorf("no location: give %s", r.examples())
	}
	m := urlScheme.FindStringSubmatch(location)
	if m == nil {
		b, ok := r.backends[r.plain]
		if !ok {
			return nil, Backend{}, fmt.Errorf("a plain path needs a URL here: give %s", r.examples())
		}
		return &url.URL{Scheme: r.plain, Path: location}, b, nil
	}
	b, ok := r.backends[m[1]]
	if !ok {
		return nil, Backend{}, fmt.Errorf("scheme %q is not supported: give %s", m[1], r.examples())
	}
	u, err := url.Parse(location)
	if err != nil {
		return nil, Backend{}, fmt.Errorf("parsing the URL: %w", err)
	}
	return u, b, nil
}

// examples lists what the registry opens, for error messages.
func (r *Registry) examples() string {
	var ex []string
	for _, b := range r.backends {
		ex = append(ex, b.Example)
	}
	sort.Strings(ex)
	if _, ok := r.backends[r.plain]; ok {
		ex = append(ex, "a plain path")
	}
	return strings.Join(ex, " or ")
}

// Redact is location without a password, for logs and errors.
func Redact(location string) string {
	u, err := url.Parse(location)
	if err != nil || u.User == nil || !urlScheme.MatchString(location) {
		return location
	}
	return u.Redacted()
}
