package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Secret is a sealed secret: Sealed is pkg/secret's ciphertext, KeyID the
// key that sealed it.
type Secret struct {
	Name    string    `json:"name"`
	KeyID   string    `json:"key_id"`
	Sealed  []byte    `json:"sealed"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// PutSecret stores s under its name.
func (b *Bolt) PutSecret(ctx context.Context, s Secret) error {
	if s.Name == "" || len(s.Sealed) == 0 || s.KeyID == "" {
		return fmt.Errorf("storing secret %q: name, key ID and sealed value are required", s.Name)
	}
	err := b.update(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bSecrets)
		var old Secret
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
func (b *Bolt) GetSecret(ctx context.Context, name string) (*Secret, error) {
	var s Secret
	err := b.view(ctx, func(tx *bolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bSecrets), []byte(name), &s)
		if err == nil && !ok {
			err = ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", name, err)
	}
	return &s, nil
}

// ListSecrets returns every sealed secret by name.
func (b *Bolt) ListSecrets(ctx context.Context) ([]Secret, error) {
	var out []Secret
	err := b.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bSecrets).ForEach(func(k, v []byte) error {
			var s Secret
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
func (b *Bolt) DeleteSecret(ctx context.Context, name string) error {
	err := b.update(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bSecrets)
		if bk.Get([]byte(name)) == nil {
			return ErrNotFound
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
func (b *Bolt) ReplaceSecrets(ctx context.Context, sealed []Secret) error {
	err := b.update(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bSecrets)
		for _, s := range sealed {
			var cur Secret
			ok, err := getJSON(bk, []byte(s.Name), &cur)
			if err != nil {
				return err
			}
			if !ok || !cur.Updated.Equal(s.Updated) {
				return fmt.Errorf("secret %s changed while it was re-sealed: %w", s.Name, ErrStale)
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
