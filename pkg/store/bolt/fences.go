package bolt

import (
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

// SwapFence sets the fence key to value while it holds old (store.FenceStore).
func (b *Store) SwapFence(ctx context.Context, key, old, value string) error {
	if key == "" {
		return fmt.Errorf("swapping a fence: the key is empty")
	}
	if err := b.ready(ctx); err != nil {
		return err
	}
	err := guard(b.path, func() error {
		return b.db.Update(func(tx *bbolt.Tx) error {
			bk := tx.Bucket(bFences)
			if err := store.CheckFenceSwap(key, string(bk.Get([]byte(key))), old); err != nil {
				return err
			}
			if value == "" {
				return bk.Delete([]byte(key))
			}
			return bk.Put([]byte(key), []byte(value))
		})
	})
	if err != nil {
		return fmt.Errorf("swapping fence %s: %w", key, b.mapErr(err))
	}
	return nil
}

// Fence is the value the fence key holds, "" when none.
func (b *Store) Fence(ctx context.Context, key string) (string, error) {
	var v string
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		v = string(tx.Bucket(bFences).Get([]byte(key)))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading fence %s: %w", key, err)
	}
	return v, nil
}
