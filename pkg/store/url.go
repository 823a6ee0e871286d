package store

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
)

// urlScheme matches the start of a URL ("bolt://", "etcd://"); anything
// else is a plain file path, colons and all.
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// OpenURL opens the store that location names:
//
//	bolt:///var/lib/ingot/ingot.db   the bbolt file at that absolute path
//	/var/lib/ingot/ingot.db          a plain path (absolute or relative): bbolt
//
// Any other scheme is refused with an error naming it and what is
// supported (etcd comes later). ctx bounds nothing yet beyond refusing to
// start when it is done.
func OpenURL(ctx context.Context, location string, opts Options) (Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", location, err)
	}
	path, err := boltPath(location)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", location, err)
	}
	s, err := Open(path, opts)
	if err != nil {
		return nil, err // Open names the path
	}
	return s, nil
}

// boltPath is the bbolt file location names, or why location names none.
func boltPath(location string) (string, error) {
	if location == "" {
		return "", fmt.Errorf("no location: give a path or bolt:///path/to/ingot.db")
	}
	m := urlScheme.FindStringSubmatch(location)
	if m == nil {
		return location, nil
	}
	if m[1] != "bolt" {
		return "", fmt.Errorf("scheme %q is not supported: use bolt:///path/to/ingot.db or a plain path (etcd is not supported yet)", m[1])
	}
	u, err := url.Parse(location)
	if err != nil {
		return "", fmt.Errorf("parsing the URL: %w", err)
	}
	switch {
	case u.Host != "" && u.Host != "localhost":
		return "", fmt.Errorf("bolt URL names host %q, but a bbolt file is local: write bolt:///absolute/path (three slashes) or a plain path", u.Host)
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("bolt URL has a query or fragment; options go in the configuration, not the URL")
	case u.User != nil:
		return "", fmt.Errorf("bolt URL has user information; a bbolt file takes none")
	case u.Path == "" || u.Path == "/":
		return "", fmt.Errorf("bolt URL names no file: write bolt:///path/to/ingot.db")
	}
	return u.Path, nil
}
