package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/store"
)

// secretShards is how many keys the sealed secrets are spread over. Key
// rotation re-seals every secret in one atomic write (ReplaceSecrets): one
// key per secret would need a compare and a put per secret, and etcd takes
// 128 of each in a transaction; 32 shards take any number of secrets in one
// transaction of at most 32 compares and 32 puts, bounded only by the
// request size (about 1 MiB: some 3,000 secrets of a BMC password's size).
// A write of one secret rewrites its shard (1/32 of them).
const secretShards = 32

// shardOf is the shard a secret's name lives in.
func shardOf(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % secretShards)
}

// shard is the secrets of one shard by name.
type shard map[string]store.Secret

// readShards reads the shards of names (in one request).
func (t *tx) readShards(names ...string) (map[int]shard, error) {
	var ks []string
	for _, n := range names {
		ks = append(ks, t.s.k.secretShard(shardOf(n)))
	}
	got, err := t.get(ks...)
	if err != nil {
		return nil, err
	}
	out := map[int]shard{}
	for _, n := range names {
		i := shardOf(n)
		if _, ok := out[i]; ok {
			continue
		}
		sh := shard{}
		if raw, ok := got[t.s.k.secretShard(i)]; ok {
			if err := json.Unmarshal(raw, &sh); err != nil {
				return nil, fmt.Errorf("decoding secrets shard %d: %w", i, err)
			}
		}
		out[i] = sh
	}
	return out, nil
}

// writeShard puts sh, or deletes its key when it is empty.
func (t *tx) writeShard(i int, sh shard) error {
	k := t.s.k.secretShard(i)
	if len(sh) == 0 {
		t.del(k)
		return nil
	}
	raw, err := json.Marshal(sh)
	if err != nil {
		return err
	}
	t.put(k, raw)
	return nil
}

// PutSecret stores sec under its name, stamping Updated (Created kept).
func (s *Store) PutSecret(ctx context.Context, sec store.Secret) error {
	if sec.Name == "" || len(sec.Sealed) == 0 || sec.KeyID == "" {
		return fmt.Errorf("storing secret %q: name, key ID and sealed value are required", sec.Name)
	}
	_, err := s.update(ctx, func(t *tx) error {
		shards, err := t.readShards(sec.Name)
		if err != nil {
			return err
		}
		i := shardOf(sec.Name)
		now := s.opts.Now().UTC()
		rec := sec
		rec.Created, rec.Updated = now, now
		if old, ok := shards[i][sec.Name]; ok {
			rec.Created = old.Created
		}
		shards[i][sec.Name] = rec
		return t.writeShard(i, shards[i])
	})
	if err != nil {
		return fmt.Errorf("storing secret %s: %w", sec.Name, err)
	}
	return nil
}

// GetSecret returns the sealed secret name.
func (s *Store) GetSecret(ctx context.Context, name string) (*store.Secret, error) {
	var out store.Secret
	err := s.view(ctx, func(t *tx) error {
		shards, err := t.readShards(name)
		if err != nil {
			return err
		}
		sec, ok := shards[shardOf(name)][name]
		if !ok {
			return store.ErrNotFound
		}
		out = sec
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", name, err)
	}
	return &out, nil
}

// ListSecrets returns every sealed secret, sorted by name.
func (s *Store) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	var out []store.Secret
	err := s.view(ctx, func(t *tx) error {
		out = []store.Secret{}
		return t.scanPrefix(s.k.secrets(), false, func(kv *mvccpb.KeyValue) error {
			var sh shard
			if err := json.Unmarshal(kv.Value, &sh); err != nil {
				return fmt.Errorf("decoding secrets shard %s: %w", kv.Key, err)
			}
			for _, sec := range sh {
				out = append(out, sec)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	slices.SortFunc(out, func(a, b store.Secret) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteSecret removes the secret name.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	_, err := s.update(ctx, func(t *tx) error {
		shards, err := t.readShards(name)
		if err != nil {
			return err
		}
		i := shardOf(name)
		if _, ok := shards[i][name]; !ok {
			return store.ErrNotFound
		}
		delete(shards[i], name)
		return t.writeShard(i, shards[i])
	})
	if err != nil {
		return fmt.Errorf("deleting secret %s: %w", name, err)
	}
	return nil
}

// ReplaceSecrets stores every secret of sealed in one transaction, if
// none changed (Updated) since it was read; store.ErrStale, and nothing
// written, if one did.
func (s *Store) ReplaceSecrets(ctx context.Context, sealed []store.Secret) error {
	names := make([]string, len(sealed))
	for i, sec := range sealed {
		names[i] = sec.Name
	}
	_, err := s.update(ctx, func(t *tx) error {
		shards, err := t.readShards(names...)
		if err != nil {
			return err
		}
		now := s.opts.Now().UTC()
		for _, sec := range sealed {
			sh := shards[shardOf(sec.Name)]
			cur, ok := sh[sec.Name]
			if !ok || !cur.Updated.Equal(sec.Updated) {
				return fmt.Errorf("secret %s changed while it was re-sealed: %w", sec.Name, store.ErrStale)
			}
			sec.Updated = now
			sh[sec.Name] = sec
		}
		for i, sh := range shards {
			if err := t.writeShard(i, sh); err != nil {
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
