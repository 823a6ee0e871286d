package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

// PutSecret stores s under its name.
func (b *Store) PutSecret(ctx context.Context, s store.Secret) error {
	if s.Name == "" || len(s.Sealed) == 0 || s.KeyID == "" {
		return fmt.Errorf("storing secret %q: name, key ID and sealed value are required", s.Name)
	}
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		bk := tx.Bucket(bSecrets)
		var old store.Secret
		ok, err := getJSON(bk, []byte(s.Name), &old)
		if err != nil {
			return err
		}
		now := b.opts.Now().UTC()
		s.Created, s.Updated = now, now
		if ok {
			s.Created = old.Created
		}
		return putJSON(bk, []byte(s.Name), &s)
	})
	if err != nil {
		return fmt.Errorf("storing secret %s: %w", s.Name, err)
	}
	return nil
}

// GetSecret returns the sealed secret name.
func (b *Store) GetSecret(ctx context.Context, name string) (*store.Secret, error) {
	var s store.Secret
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bSecrets), []byte(name), &s)
		if err == nil && !ok {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", name, err)
	}
	return &s, nil
}

// ListSecrets returns every sealed secret by name.
func (b *Store) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	var out []store.Secret
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bSecrets).ForEach(func(k, v []byte) error {
			var s store.Secret
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("decoding secret %s: %w", k, err)
			}
			out = append(out, s)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret removes the secret name.
func (b *Store) DeleteSecret(ctx context.Context, name string) error {
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		bk := tx.Bucket(bSecrets)
		if bk.Get([]byte(name)) == nil {
			return store.ErrNotFound
		}
		return bk.Delete([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("deleting secret %s: %w", name, err)
	}
	return nil
}

// ReplaceSecrets stores every secret of sealed in one write, if none
// changed since it was read.
func (b *Store) ReplaceSecrets(ctx context.Context, sealed []store.Secret) error {
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		bk := tx.Bucket(bSecrets)
		for _, s := range sealed {
			var cur store.Secret
			ok, err := getJSON(bk, []byte(s.Name), &cur)
			if err != nil {
				return err
			}
			if !ok || !cur.Updated.Equal(s.Updated) {
				return fmt.Errorf("secret %s changed while it was re-sealed: %w", s.Name, store.ErrStale)
			}
			s.Updated = b.opts.Now().UTC()
			if err := putJSON(bk, []byte(s.Name), &s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("re-sealing %d secrets: %w", len(sealed), err)
	}
	return nil
}
