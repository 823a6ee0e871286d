package etcd

import (
	"context"
	"io"
	"net/url"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Backend is the etcd backend for store.Registry:
// etcd://host1:2379,host2:2379,host3:2379/prefix?param=value (ParseURL).
// Restore writes a backup into an empty prefix only (see Restore).
func Backend() store.Backend {
	return store.Backend{
		Scheme:  "etcd",
		Example: "etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/ingot",
		Open: func(ctx context.Context, u *url.URL, opts store.Options) (store.Store, error) {
			s, err := OpenURL(ctx, u.String(), opts)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Restore: func(ctx context.Context, u *url.URL, src io.Reader, opts store.Options) (string, error) {
			c, err := ParseURL(u.String())
			if err != nil {
				return "", err
			}
			return "", Restore(ctx, c, src, opts)
		},
	}
}
