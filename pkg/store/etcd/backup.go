package etcd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Backup writes the store as the portable backup every backend writes: a
// bbolt database file in the bbolt backend's layout, which Open and
// `ingot admin restore` take as they take a bbolt backup, on any backend.
// Every record is read at one etcd revision (etcd's MVCC: writers go on
// and are not in the copy), so the copy is one state of the store.
// Revisions go with the records: a machine's and a job's revision in the
// file is its etcd mod revision, and the file's revision counters start
// at the copy's etcd revision, so a revision handed out after a restore
// is above every one in the file. Sealed secrets are copied sealed.
//
// This is ingot's backup of its own records under one prefix; the
// cluster's backup is etcd's snapshot (etcdctl snapshot save), which holds
// every prefix and etcd's own state.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	dir, err := os.MkdirTemp("", "ingot-etcd-backup-")
	if err != nil {
		return 0, fmt.Errorf("backing up %s: %w", s.cfg, err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ingot.db")
	if err := s.writeBolt(ctx, path); err != nil {
		return 0, fmt.Errorf("backing up %s: %w", s.cfg, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("backing up %s: %w", s.cfg, err)
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return n, fmt.Errorf("backing up %s: sending the copy: %w", s.cfg, err)
	}
	return n, nil
}

// writeBolt makes the empty file with the bbolt backend itself (its
// buckets, at its schema version), then fills it from one etcd revision.
func (s *Store) writeBolt(ctx context.Context, path string) error {
	empty, err := store.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("making the backup file: %w", err)
	}
	if err := empty.Close(); err != nil {
		return fmt.Errorf("making the backup file: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("opening the backup file: %w", err)
	}
	err = s.view(ctx, func(t *tx) error {
		if _, err := t.fetch([]string{s.k.layout()}); err != nil { // pins the revision
			return err
		}
		for _, step := range s.backupSteps() {
			if err := db.Update(func(btx *bolt.Tx) error { return step(t, btx) }); err != nil {
				return err
			}
		}
		return db.Update(func(btx *bolt.Tx) error { return setRevisions(btx, uint64(t.rev)) })
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// The bbolt backend's bucket names (pkg/store bolt.go); the backup tests
// open the file with the bbolt backend and compare every record, so a
// change of its layout fails them.
var (
	bMachines  = []byte("machines")
	bMachRev   = []byte("machine_rev")
	bInventory = []byte("inventory")
	bEvents    = []byte("events")
	bLeases    = []byte("leases")
	bIdxIP     = []byte("idx_lease_ip")
	bJobs      = []byte("jobs")
	bTokens    = []byte("tokens")
	bSecrets   = []byte("secrets")
	bTelemetry = []byte("telemetry")
	bPowerDays = []byte("power_days")
	bPowerSums = []byte("power_summaries")
	bIndex     = map[string][]byte{"name": []byte("idx_name"), "mac": []byte("idx_mac"),
		"serial": []byte("idx_serial"), "bmc": []byte("idx_bmc")}
)

// backupStep copies one kind of record from t into btx.
type backupStep func(t *tx, btx *bolt.Tx) error

func (s *Store) backupSteps() []backupStep {
	k := s.k
	return []backupStep{
		copyFlat(k.p+"m/", bMachines),
		copyMachineRevs(k.p + "m/"),
		copyIndexes(k.p + "k/"),
		copySeqs(k.p+"inv/", k.p+"invseq/", bInventory),
		copySeqs(k.p+"ev/", k.p+"evseq/", bEvents),
		copyFlat(k.leases(), bLeases),
		copyFlat(k.p+"lip/", bIdxIP),
		copyJobs(k.jobs()),
		copyFlat(k.tokens(), bTokens),
		copySecrets(k.secrets()),
		copyFlat(k.nodes(), bTelemetry),
		copyFlat(k.powerDays(), bPowerDays),
		copyFlat(k.powerSums(), bPowerSums),
	}
}

// copyFlat copies every key under prefix, less the prefix, into bucket.
func copyFlat(prefix string, bucket []byte) backupStep {
	return func(t *tx, btx *bolt.Tx) error {
		bk := btx.Bucket(bucket)
		return t.scanPrefix(prefix, false, func(kv *mvccpb.KeyValue) error {
			return bk.Put([]byte(strings.TrimPrefix(string(kv.Key), prefix)), kv.Value)
		})
	}
}

// copyMachineRevs writes each machine's revision (its mod revision).
func copyMachineRevs(prefix string) backupStep {
	return func(t *tx, btx *bolt.Tx) error {
		bk := btx.Bucket(bMachRev)
		return t.scanPrefix(prefix, true, func(kv *mvccpb.KeyValue) error {
			return bk.Put([]byte(strings.TrimPrefix(string(kv.Key), prefix)), u64(uint64(kv.ModRevision)))
		})
	}
}

// copyIndexes copies the unique keys k/<kind>/<value> into idx_<kind>.
func copyIndexes(prefix string) backupStep {
	return func(t *tx, btx *bolt.Tx) error {
		return t.scanPrefix(prefix, false, func(kv *mvccpb.KeyValue) error {
			kind, value, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
			if !ok || bIndex[kind] == nil {
				return fmt.Errorf("unique key %s: expected k/<name|mac|serial|bmc>/<value>", kv.Key)
			}
			return btx.Bucket(bIndex[kind]).Put([]byte(value), kv.Value)
		})
	}
}

// copySeqs copies <prefix><id>/<seq> records into parent/<id> buckets
// keyed by big-endian seq, each bucket's sequence the machine's counter.
func copySeqs(prefix, counters string, parent []byte) backupStep {
	return func(t *tx, btx *bolt.Tx) error {
		top := btx.Bucket(parent)
		err := t.scanPrefix(prefix, false, func(kv *mvccpb.KeyValue) error {
			id, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
			seq, err := parseSeqKey(string(kv.Key))
			if err != nil {
				return fmt.Errorf("record %s: %w", kv.Key, err)
			}
			bk, err := top.CreateBucketIfNotExists([]byte(id))
			if err != nil {
				return err
			}
			return bk.Put(u64(seq), kv.Value)
		})
		if err != nil {
			return err
		}
		return t.scanPrefix(counters, false, func(kv *mvccpb.KeyValue) error {
			n, err := strconv.ParseUint(string(kv.Value), 10, 64)
			if err != nil {
				return fmt.Errorf("counter %s is %q, expected a number", kv.Key, kv.Value)
			}
			bk, err := top.CreateBucketIfNotExists([]byte(strings.TrimPrefix(string(kv.Key), counters)))
			if err != nil {
				return err
			}
			return bk.SetSequence(n)
		})
	}
}

// copyJobs copies jobs with their revision (mod revision) in the record.
func copyJobs(prefix string) backupStep {
	return func(t *tx, btx *bolt.Tx) error {
		bk := btx.Bucket(bJobs)
		return t.scanPrefix(prefix, false, func(kv *mvccpb.KeyValue) error {
			j, err := decodeJob(kv.Value, kv.ModRevision)
			if err != nil {
				return fmt.Errorf("%s: %w", kv.Key, err)
			}
			raw, err := json.Marshal(j)
			if err != nil {
				return err
			}
			return bk.Put([]byte(j.ID), raw)
		})
	}
}

// copySecrets copies each secret of each shard under its name.
func copySecrets(prefix string) backupStep {
	return func(t *tx, btx *bolt.Tx) error {
		bk := btx.Bucket(bSecrets)
		return t.scanPrefix(prefix, false, func(kv *mvccpb.KeyValue) error {
			var sh shard
			if err := json.Unmarshal(kv.Value, &sh); err != nil {
				return fmt.Errorf("decoding secrets shard %s: %w", kv.Key, err)
			}
			for name, sec := range sh {
				raw, err := json.Marshal(&sec)
				if err != nil {
					return err
				}
				if err := bk.Put([]byte(name), raw); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// setRevisions starts the file's machine and job revision counters at rev,
// the etcd revision the copy was read at: above every revision in it.
func setRevisions(btx *bolt.Tx, rev uint64) error {
	if err := btx.Bucket(bMachRev).SetSequence(rev); err != nil {
		return err
	}
	return btx.Bucket(bJobs).SetSequence(rev)
}

// u64 is v as a big-endian key, as the bbolt backend writes sequences.
func u64(v uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, v)
	return k
}
