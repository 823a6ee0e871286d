package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/store"
)

// SwapFence sets the fence key to value while it holds old ("" = absent),
// in one etcd transaction comparing what it holds (store.FenceStore);
// value "" removes it. A swap is not itself fenced.
func (s *Store) SwapFence(ctx context.Context, key, old, value string) error {
	_, err := s.swapFence(ctx, key, old, value)
	return err
}

// swapFence is SwapFence, returning the revision of the swap.
func (s *Store) swapFence(ctx context.Context, key, old, value string) (int64, error) {
	if key == "" {
		return 0, fmt.Errorf("swapping a fence: the key is empty")
	}
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	k := s.k.fence(key)
	cmp := clientv3.Compare(clientv3.Value(k), "=", old)
	if old == "" {
		cmp = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	}
	op := clientv3.OpPut(k, value)
	if value == "" {
		op = clientv3.OpDelete(k)
	}
	resp, err := s.cli.Txn(ctx).If(cmp).Then(op).Else(clientv3.OpGet(k)).Commit()
	if err != nil {
		return 0, fmt.Errorf("swapping fence %s: %w", key, s.mapErr(err))
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	have := ""
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		have = string(kvs[0].Value)
	}
	if err := store.CheckFenceSwap(key, have, old); err != nil {
		return 0, fmt.Errorf("swapping fence %s: %w", key, err)
	}
	// The compare failed but what it read matches: "" stored as a value
	// (never written by SwapFence) against old "".
	return 0, fmt.Errorf("swapping fence %s: it holds an empty value: %w", key, store.ErrStale)
}

// Fence is the value the fence key holds, "" when none (a linearizable
// read: an owner checking its fence sees the latest swap).
func (s *Store) Fence(ctx context.Context, key string) (string, error) {
	var v string
	err := s.view(ctx, func(t *tx) error {
		k := s.k.fence(key)
		got, err := t.get(k)
		v = string(got[k])
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading fence %s: %w", key, err)
	}
	return v, nil
}
