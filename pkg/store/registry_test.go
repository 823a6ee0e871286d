package store_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// TestRegistry checks how a location picks its backend: by scheme, a plain
// path by the plain backend, credentials never in an error.
func TestRegistry(t *testing.T) {
	var opened []string
	fake := func(scheme string) store.Backend {
		return store.Backend{Scheme: scheme, Example: scheme + "://example",
			Open: func(_ context.Context, u *url.URL, _ store.Options) (store.Store, error) {
				opened = append(opened, u.Scheme+" "+u.Host+" "+u.Path)
				return storetest.FailAll(nil), nil
			}}
	}
	r := store.NewRegistry("one", fake("one"), fake("two"))
	tests := map[string]struct {
		location string
		opened   string
		wantErr  []string
	}{
		"scheme one":      {location: "one:///var/x.db", opened: "one  /var/x.db"},
		"scheme two":      {location: "two://h1:2379,h2:2379/site", opened: "two h1:2379,h2:2379 /site"},
		"plain path":      {location: "rel/x.db", opened: "one  rel/x.db"},
		"colon in path":   {location: "data:v2.db", opened: "one  data:v2.db"},
		"unknown":         {location: "three://x", wantErr: []string{`scheme "three" is not supported`, "one://example or two://example or a plain path"}},
		"empty":           {location: "", wantErr: []string{"no location"}},
		"password hidden": {location: "three://user:hunter2@x/", wantErr: []string{"user:xxxxx@x"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opened = nil
			s, err := r.Open(context.Background(), tc.location, store.Options{})
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Open(%q) succeeded; want an error", tc.location)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Open(%q) = %q; want %q in it", tc.location, err, w)
					}
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if len(opened) != 1 || opened[0] != tc.opened {
				t.Errorf("opened %q; want %q", opened, tc.opened)
			}
		})
	}
	if _, err := r.Restore(context.Background(), "two://x/", strings.NewReader(""), store.Options{}); err == nil || !strings.Contains(err.Error(), "cannot restore") {
		t.Errorf("Restore on a backend without one: %v", err)
	}
}
