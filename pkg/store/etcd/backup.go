package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// Backup writes the store as the portable backup every backend writes: a
// bbolt database file in the bbolt backend's layout, written by that
// backend's own writer (bolt.Writer), which `ingot admin restore` takes on
// any backend. Every record is read at one etcd revision (etcd's MVCC:
// writers go on and are not in the copy), so the copy is one state of the
// store. A machine's and a job's revision in the file is its etcd mod
// revision, and the file's revision counters start at the copy's etcd
// revision, so a revision handed out after a restore to bbolt is above
// every one in the file. Sealed secrets are copied sealed.
//
// This is ingot's backup of its own records under one prefix; the
// cluster's backup is etcd's snapshot (etcdctl snapshot save), which holds
// every prefix and etcd's own state.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := s.ready(ctx); err != nil {
		return 0, fmt.Errorf("backing up %s: %w", s.Location(), err)
	}
	dir, err := os.MkdirTemp("", "ingot-etcd-backup-")
	if err != nil {
		return 0, fmt.Errorf("backing up %s: %w", s.Location(), err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ingot.db")
	if err := s.writeBolt(ctx, path); err != nil {
		return 0, fmt.Errorf("backing up %s: %w", s.Location(), err)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("backing up %s: %w", s.Location(), err)
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return n, fmt.Errorf("backing up %s: sending the copy: %w", s.Location(), err)
	}
	return n, nil
}

// writeBolt writes the records at one etcd revision into a new file.
func (s *Store) writeBolt(ctx context.Context, path string) error {
	wr, err := bolt.NewWriter(path)
	if err != nil {
		return err
	}
	var rev int64
	err = s.view(ctx, func(t *tx) error {
		if _, err := t.fetch([]string{s.k.layout()}); err != nil { // pins the revision
			return err
		}
		rev = t.rev
		return t.export(wr)
	})
	if cerr := wr.Close(uint64(rev)); err == nil {
		err = cerr
	}
	return err
}

// export hands every record of the prefix, at t's revision, to to.
func (t *tx) export(to bolt.Records) error {
	for _, step := range []func(bolt.Records) error{t.exportMachines, t.exportHistory, t.exportLeases,
		t.exportJobs, t.exportTokens, t.exportSecrets, t.exportTelemetry, t.exportFences} {
		if err := step(to); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) exportMachines(to bolt.Records) error {
	return t.scanPrefix(t.s.k.machines(), false, func(kv *mvccpb.KeyValue) error {
		m, err := decodeMachine(kv.Value)
		if err != nil {
			return fmt.Errorf("%s: %w", kv.Key, err)
		}
		return to.Machine(*m, uint64(kv.ModRevision))
	})
}

// exportHistory hands over inventories, events and each machine's counters.
func (t *tx) exportHistory(to bolt.Records) error {
	k := t.s.k
	err := t.scanPrefix(k.p+"inv/", false, func(kv *mvccpb.KeyValue) error {
		var sn store.Snapshot
		if err := json.Unmarshal(kv.Value, &sn); err != nil {
			return fmt.Errorf("decoding snapshot %s: %w", kv.Key, err)
		}
		return to.Inventory(sn)
	})
	if err != nil {
		return err
	}
	err = t.scanPrefix(k.p+"ev/", false, func(kv *mvccpb.KeyValue) error {
		var ev machine.Event
		if err := json.Unmarshal(kv.Value, &ev); err != nil {
			return fmt.Errorf("decoding event %s: %w", kv.Key, err)
		}
		return to.Event(ev)
	})
	if err != nil {
		return err
	}
	counters := map[string]*[2]uint64{}
	for i, prefix := range []string{k.p + "invseq/", k.p + "evseq/"} {
		err := t.scanPrefix(prefix, false, func(kv *mvccpb.KeyValue) error {
			n, err := strconv.ParseUint(string(kv.Value), 10, 64)
			if err != nil {
				return fmt.Errorf("counter %s is %q, expected a number", kv.Key, kv.Value)
			}
			id := strings.TrimPrefix(string(kv.Key), prefix)
			if counters[id] == nil {
				counters[id] = new([2]uint64)
			}
			counters[id][i] = n
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(counters)) {
		if err := to.Counters(id, counters[id][0], counters[id][1]); err != nil {
			return err
		}
	}
	return nil
}

// exportLeases hands leases over in the order bolt.Leases gives them.
func (t *tx) exportLeases(to bolt.Records) error {
	var ls []store.Lease
	err := t.scanPrefix(t.s.k.leases(), false, func(kv *mvccpb.KeyValue) error {
		l, err := decodeLease(kv.Value)
		if err != nil {
			return fmt.Errorf("%s: %w", kv.Key, err)
		}
		ls = append(ls, *l)
		return nil
	})
	if err != nil {
		return err
	}
	return bolt.Leases(ls, to)
}

func (t *tx) exportJobs(to bolt.Records) error {
	return t.scanPrefix(t.s.k.jobs(), false, func(kv *mvccpb.KeyValue) error {
		j, err := decodeJob(kv.Value, kv.ModRevision)
		if err != nil {
			return fmt.Errorf("%s: %w", kv.Key, err)
		}
		return to.Job(*j)
	})
}

func (t *tx) exportTokens(to bolt.Records) error {
	return t.scanPrefix(t.s.k.tokens(), false, func(kv *mvccpb.KeyValue) error {
		var tk store.Token
		if err := json.Unmarshal(kv.Value, &tk); err != nil {
			return fmt.Errorf("decoding token: %w", err) // never name the hash
		}
		return to.Token(tk)
	})
}

func (t *tx) exportSecrets(to bolt.Records) error {
	return t.scanPrefix(t.s.k.secrets(), false, func(kv *mvccpb.KeyValue) error {
		var sh shard
		if err := json.Unmarshal(kv.Value, &sh); err != nil {
			return fmt.Errorf("decoding secrets shard %s: %w", kv.Key, err)
		}
		for _, name := range slices.Sorted(maps.Keys(sh)) {
			if err := to.Secret(sh[name]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *tx) exportTelemetry(to bolt.Records) error {
	k := t.s.k
	err := t.scanPrefix(k.nodes(), false, func(kv *mvccpb.KeyValue) error {
		return to.NodeTelemetry(store.NodeTelemetry{Machine: strings.TrimPrefix(string(kv.Key), k.nodes()), State: kv.Value})
	})
	if err != nil {
		return err
	}
	for _, p := range []struct {
		prefix string
		fn     func(store.PowerDay) error
	}{{k.powerDays(), to.PowerDay}, {k.powerSums(), to.PowerSummary}} {
		err := t.scanPrefix(p.prefix, false, func(kv *mvccpb.KeyValue) error {
			m, d, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), p.prefix), "/")
			if !ok {
				return fmt.Errorf("power day key %s: expected MACHINE/DAY", kv.Key)
			}
			return p.fn(store.PowerDay{Machine: m, Day: d, Buckets: kv.Value})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) exportFences(to bolt.Records) error {
	return t.scanPrefix(t.s.k.fences(), false, func(kv *mvccpb.KeyValue) error {
		return to.Fence(strings.TrimPrefix(string(kv.Key), t.s.k.fences()), string(kv.Value))
	})
}
