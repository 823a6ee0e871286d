package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// Restore writes the portable backup src (a bbolt file, see Backup) into
// the prefix c names, which must hold no records: a restore never merges
// into or overwrites a site's records. It claims the prefix with a marker
// key first (meta/restoring: Open refuses a prefix that holds it, so no
// instance serves a half-written store, and a second restore cannot
// interleave), writes the records in transactions of etcd's limits, each
// conditional on the marker still being this restore's, and removes the
// marker in the last one. IDs, sequence numbers, counters, timestamps,
// fences and sealed secrets are kept; a machine's and a job's revision is
// the etcd revision of its write here (revisions are per backend).
//
// A restore that dies halfway leaves the marker: delete the prefix
// (etcdctl del --prefix /PREFIX/) and run it again.
func Restore(ctx context.Context, c Config, src io.Reader, opts store.Options) error {
	tmp, err := os.MkdirTemp("", "ingot-etcd-restore-")
	if err != nil {
		return fmt.Errorf("restoring into %s: %w", c, err)
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "backup.db")
	if err := copyFile(path, src); err != nil {
		return fmt.Errorf("restoring into %s: reading the backup: %w", c, err)
	}
	s, err := open(ctx, c, opts, true)
	if err != nil {
		return fmt.Errorf("restoring into %s: %w", c, err)
	}
	defer s.Close()
	im, err := s.claimEmpty(ctx)
	if err != nil {
		return fmt.Errorf("restoring into %s: %w", c, err)
	}
	if err := bolt.ReadFile(ctx, path, im); err != nil {
		return fmt.Errorf("restoring into %s: %w (the prefix holds what was written so far and the restore marker: delete it with etcdctl del --prefix %s and run the restore again)", c, err, c.Prefix)
	}
	if err := im.finish(); err != nil {
		return fmt.Errorf("restoring into %s: %w (the prefix holds what was written so far and the restore marker: delete it with etcdctl del --prefix %s and run the restore again)", c, err, c.Prefix)
	}
	return nil
}

func copyFile(path string, src io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// claimEmpty puts the restore marker if the prefix has none, then checks
// that the prefix holds nothing but the layout version and the marker
// (removing the marker and refusing if it does).
func (s *Store) claimEmpty(ctx context.Context) (*importer, error) {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	mk := s.k.restoring()
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(mk), "=", 0)).
		Then(clientv3.OpPut(mk, token)).Commit()
	if err != nil {
		return nil, fmt.Errorf("claiming the prefix: %w", err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("another restore holds %s (or one died halfway: delete the prefix with etcdctl del --prefix %s): %w", mk, s.k.p, store.ErrExists)
	}
	n, err := s.cli.Get(ctx, s.k.p, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("counting the prefix's keys: %w", err)
	}
	if n.Count > 2 {
		_, _ = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(mk), "=", token)).Then(clientv3.OpDelete(mk)).Commit()
		return nil, fmt.Errorf("prefix %s holds %d records: a restore writes only into an empty prefix (restore into a new prefix, or delete this one with etcdctl del --prefix %s first): %w",
			s.k.p, n.Count-2, s.k.p, store.ErrExists)
	}
	return &importer{s: s, ctx: ctx, token: token, secrets: map[int]shard{}, at: map[string]int{}}, nil
}

// importer writes records raw (bolt.Records) in transactions that stay
// under etcd's limits, each conditional on the restore marker.
type importer struct {
	s       *Store
	ctx     context.Context
	token   string
	ops     []clientv3.Op
	at      map[string]int // key -> index in ops (etcd refuses a key twice in one transaction)
	bytes   int
	secrets map[int]shard
	n       int
}

var _ bolt.Records = (*importer)(nil)

// put queues key=val, flushing first when the transaction would be full.
func (im *importer) put(key string, val []byte) error {
	if len(im.ops) >= maxOps-1 || im.bytes+len(key)+len(val) > maxTxnBytes {
		if err := im.flush(); err != nil {
			return err
		}
	}
	if i, ok := im.at[key]; ok {
		im.ops[i] = clientv3.OpPut(key, string(val)) // a later write of the key wins
		im.bytes += len(val)
		return nil
	}
	im.at[key] = len(im.ops)
	im.ops = append(im.ops, clientv3.OpPut(key, string(val)))
	im.bytes += len(key) + len(val)
	im.n++
	return nil
}

// flush sends the queued puts, conditional on the marker.
func (im *importer) flush(last ...clientv3.Op) error {
	if len(im.ops) == 0 && len(last) == 0 {
		return nil
	}
	mk := im.s.k.restoring()
	ops := append(im.ops, last...)
	resp, err := im.s.cli.Txn(im.ctx).If(clientv3.Compare(clientv3.Value(mk), "=", im.token)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("writing %d records: %w", len(ops), err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("the restore marker %s changed: another restore or a deletion of the prefix got in: %w", mk, store.ErrConflict)
	}
	im.ops, im.bytes = nil, 0
	clear(im.at)
	return nil
}

// finish writes the secrets' shards and removes the marker.
func (im *importer) finish() error {
	for _, i := range slices.Sorted(maps.Keys(im.secrets)) {
		raw, err := json.Marshal(im.secrets[i])
		if err != nil {
			return err
		}
		if err := im.put(im.s.k.secretShard(i), raw); err != nil {
			return err
		}
	}
	if len(im.ops) >= maxOps-1 {
		if err := im.flush(); err != nil {
			return err
		}
	}
	return im.flush(clientv3.OpDelete(im.s.k.restoring()))
}

func (im *importer) json(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	return im.put(key, raw)
}

func (im *importer) Machine(m machine.Machine, _ uint64) error {
	k := im.s.k
	if err := im.json(k.machine(m.ID), &m); err != nil {
		return err
	}
	for _, u := range store.MachineKeys(&m) {
		if err := im.put(k.unique(u), []byte(m.ID)); err != nil {
			return err
		}
	}
	return nil
}

func (im *importer) Inventory(sn store.Snapshot) error {
	return im.json(im.s.k.inventory(sn.MachineID, sn.Seq), &sn)
}

func (im *importer) Event(ev machine.Event) error {
	return im.json(im.s.k.event(ev.Machine, ev.Seq), &ev)
}

func (im *importer) Counters(id string, inventory, events uint64) error {
	if inventory > 0 {
		if err := im.put(im.s.k.invSeq(id), []byte(strconv.FormatUint(inventory, 10))); err != nil {
			return err
		}
	}
	if events > 0 {
		return im.put(im.s.k.evSeq(id), []byte(strconv.FormatUint(events, 10)))
	}
	return nil
}

// Lease writes the lease and points its IP's index at it (leases come
// oldest Updated first, so the last writer of an IP keeps its entry).
func (im *importer) Lease(l store.Lease) error {
	if err := im.json(im.s.k.lease(l.MAC), &l); err != nil {
		return err
	}
	return im.put(im.s.k.leaseIP(l.IP.String()), []byte(l.MAC))
}

func (im *importer) Job(j store.Job) error {
	j.Revision = 0 // the mod revision of this write is the job's revision here
	if err := im.json(im.s.k.job(j.ID), &j); err != nil {
		return err
	}
	return im.put(im.s.k.jobState(string(j.State), j.ID), nil)
}

func (im *importer) Token(t store.Token) error {
	k := im.s.k
	if err := im.json(k.token(t.Hash), &t); err != nil {
		return err
	}
	if err := im.put(k.tokenScopes(t.Scope)+t.Hash, nil); err != nil {
		return err
	}
	if t.JobID == "" {
		return nil
	}
	return im.put(k.tokenJobs(t.JobID)+t.Hash, nil)
}

func (im *importer) Secret(sec store.Secret) error {
	i := shardOf(sec.Name)
	if im.secrets[i] == nil {
		im.secrets[i] = shard{}
	}
	im.secrets[i][sec.Name] = sec
	return nil
}

func (im *importer) NodeTelemetry(n store.NodeTelemetry) error {
	return im.put(im.s.k.node(n.Machine), n.State)
}

func (im *importer) PowerDay(d store.PowerDay) error {
	return im.put(day(im.s.k.powerDays(), d.Machine, d.Day), d.Buckets)
}

func (im *importer) PowerSummary(d store.PowerDay) error {
	return im.put(day(im.s.k.powerSums(), d.Machine, d.Day), d.Buckets)
}

func (im *importer) Fence(key, value string) error { return im.put(im.s.k.fence(key), []byte(value)) }
