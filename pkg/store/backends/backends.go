// Package backends lists the store backends ingot is built with. It is the
// one place a backend joins: the composition root (pkg/serve) and offline
// admin open stores through it, by URL, and never import a backend.
package backends

import (
	"context"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
)

// Registry is every backend, one line each; a plain path is a bbolt file.
func Registry() *store.Registry {
	return store.NewRegistry("bolt",
		bolt.Backend(),
		etcd.Backend(),
	)
}

// Open opens the store location names (store.Registry.Open).
func Open(ctx context.Context, location string, opts store.Options) (store.Store, error) {
	return Registry().Open(ctx, location, opts)
}
