package bolt

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// migration moves a file from schema version i to i+1, where i is its index
// in migrations(). Migrations run in Open, all pending ones in one
// transaction: a failure leaves the file as it was.
type migration struct {
	name string
	fn   func(tx *bbolt.Tx) error
}

// migrations is the ordered list. Append only; never edit a released step.
func migrations() []migration {
	return []migration{
		{"create base buckets", migrateV1},
		{"add the name index and normalize MACs", migrateV2},
		{"add revisions to machines and jobs", migrateV3},
		{"add the sealed secrets bucket", migrateV4},
		{"add the telemetry buckets", migrateV5},
		{"add the daily power summaries bucket", migrateV6},
		{"add the fences bucket", migrateV7},
		{"index jobs by state and tokens by scope and job", migrateV8},
	}
}

// SchemaVersion is the schema this binary reads and writes.
// (A test acting as an older binary opens with fewer steps: open.)
func SchemaVersion() int { return len(migrations()) }

// schemaVersion reads the file's version: 0 for a new, empty file.
func schemaVersion(tx *bbolt.Tx) (int, error) {
	meta := tx.Bucket(bMeta)
	if meta == nil {
		var names []string
		_ = tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
			names = append(names, string(name))
			return nil
		})
		if len(names) > 0 {
			return 0, fmt.Errorf("no %q bucket but buckets %q: not an ingot database: %w", bMeta, names, store.ErrSchema)
		}
		return 0, nil
	}
	raw := meta.Get(kSchema)
	if len(raw) != 8 {
		return 0, fmt.Errorf("meta/schema is %d bytes, expected an 8-byte big-endian version: %w", len(raw), store.ErrSchema)
	}
	return int(binary.BigEndian.Uint64(raw)), nil
}

// migrate brings the file to the schema of b.migs, or explains why it
// cannot. A file with data (schema 1 or later) is first made complete (the
// lease log a process left unapplied is applied, so the copy holds every
// lease) and copied beside itself as PATH.schema-vN-TIME; the migration
// runs only once that copy is durable, so going back is always possible
// (ingot admin restore of the copy, with the older ingot). A file of a
// newer schema is refused with store.ErrSchemaNewer, naming that copy.
func (b *Store) migrate() error {
	want := len(b.migs)
	var have int
	err := b.db.View(func(tx *bbolt.Tx) error {
		var err error
		have, err = schemaVersion(tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if have > want {
		return newerSchema(b.path, have, want)
	}
	if have == want {
		return nil
	}
	if have > 0 && b.schemaBackup {
		if _, err := b.replayLeases(newLeaseLog(b.path)); err != nil {
			return fmt.Errorf("settling the lease log before migrating schema v%d: %w", have, err)
		}
		kept, err := b.schemaCopy(have)
		if err != nil {
			return fmt.Errorf("backing up schema v%d before migrating it (nothing was migrated): %w", have, err)
		}
		b.opts.Logger.Warn("store: migrating to a newer schema; the file as it was is kept beside it (ingot admin restore it with the older ingot to go back)",
			"file", b.path, "from", have, "to", want, "backup", kept)
	}
	return b.db.Update(func(tx *bbolt.Tx) error {
		for v := have; v < want; v++ {
			b.opts.Logger.Info("migrating store", "file", b.path, "from", v, "to", v+1, "step", b.migs[v].name)
			if err := b.migs[v].fn(tx); err != nil {
				return fmt.Errorf("migrating schema v%d -> v%d (%s): %w: %w", v, v+1, b.migs[v].name, store.ErrSchema, err)
			}
		}
		meta, err := tx.CreateBucketIfNotExists(bMeta)
		if err != nil {
			return fmt.Errorf("creating meta bucket: %w", err)
		}
		return meta.Put(kSchema, u64(uint64(want)))
	})
}

// migrateV1 creates the buckets of the first schema.
func migrateV1(tx *bbolt.Tx) error {
	for _, name := range [][]byte{bMeta, bMachines, bIdxMAC, bIdxSerial, bIdxBMC,
		bInventory, bEvents, bLeases, bIdxIP, bJobs, bTokens} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("creating bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV2 adds idx_name and rewrites MACs in lower-case colon form (v1
// stored them as entered), rebuilding idx_mac. Duplicate names or MACs that
// v1 let in are reported with both machine IDs.
func migrateV2(tx *bbolt.Tx) error {
	names, err := tx.CreateBucketIfNotExists(bIdxName)
	if err != nil {
		return fmt.Errorf("creating bucket %s: %w", bIdxName, err)
	}
	if err := tx.DeleteBucket(bIdxMAC); err != nil {
		return fmt.Errorf("dropping old %s: %w", bIdxMAC, err)
	}
	macs, err := tx.CreateBucket(bIdxMAC)
	if err != nil {
		return fmt.Errorf("recreating %s: %w", bIdxMAC, err)
	}
	ms := tx.Bucket(bMachines)
	type rewrite struct{ key, val []byte }
	var rewrites []rewrite // bbolt forbids Put while iterating with ForEach
	err = ms.ForEach(func(k, v []byte) error {
		var rec map[string]json.RawMessage // keeps fields this step does not know
		var m struct {
			Name string   `json:"name"`
			MACs []string `json:"macs"`
		}
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("machine %s: %w", k, err)
		}
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("machine %s: %w", k, err)
		}
		if other := names.Get([]byte(m.Name)); other != nil {
			return fmt.Errorf("machines %s and %s share the name %q: rename one with an older ingot first", other, k, m.Name)
		}
		if err := names.Put([]byte(m.Name), copyBytes(k)); err != nil {
			return err
		}
		for i, mac := range m.MACs {
			norm, err := machine.NormalizeMAC(mac)
			if err != nil {
				return fmt.Errorf("machine %s: macs[%d]: %w", k, i, err)
			}
			if other := macs.Get([]byte(norm)); other != nil {
				return fmt.Errorf("machines %s and %s share MAC %s", other, k, norm)
			}
			if err := macs.Put([]byte(norm), copyBytes(k)); err != nil {
				return err
			}
			m.MACs[i] = norm
		}
		if len(m.MACs) > 0 {
			raw, err := json.Marshal(m.MACs)
			if err != nil {
				return err
			}
			rec["macs"] = raw
		}
		val, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		rewrites = append(rewrites, rewrite{copyBytes(k), val})
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range rewrites {
		if err := ms.Put(r.key, r.val); err != nil {
			return fmt.Errorf("rewriting machine %s: %w", r.key, err)
		}
	}
	return nil
}

// migrateV3 adds machine_rev and gives every machine and every job its first
// revision (1, 2, ... per record type, the buckets' sequences set to the
// last), so conditional updates (UpdateMachineRev, UpdateJobRev) have a
// revision to compare from the start.
func migrateV3(tx *bbolt.Tx) error {
	revs, err := tx.CreateBucketIfNotExists(bMachRev)
	if err != nil {
		return fmt.Errorf("creating bucket %s: %w", bMachRev, err)
	}
	err = tx.Bucket(bMachines).ForEach(func(k, _ []byte) error {
		rev := store.NextRevision(revs.Sequence())
		if err := revs.SetSequence(rev); err != nil {
			return err
		}
		return revs.Put(copyBytes(k), u64(rev))
	})
	if err != nil {
		return fmt.Errorf("numbering machine revisions: %w", err)
	}
	jobs := tx.Bucket(bJobs)
	type rewrite struct{ key, val []byte }
	var rewrites []rewrite // bbolt forbids writes while iterating with ForEach
	last := jobs.Sequence()
	err = jobs.ForEach(func(k, v []byte) error {
		var rec map[string]json.RawMessage // keeps fields this step does not know
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("job %s: %w", k, err)
		}
		last = store.NextRevision(last)
		raw, err := json.Marshal(last)
		if err != nil {
			return err
		}
		rec["revision"] = raw
		val, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		rewrites = append(rewrites, rewrite{copyBytes(k), val})
		return nil
	})
	if err != nil {
		return fmt.Errorf("numbering job revisions: %w", err)
	}
	for _, r := range rewrites {
		if err := jobs.Put(r.key, r.val); err != nil {
			return fmt.Errorf("rewriting job %s: %w", r.key, err)
		}
	}
	return jobs.SetSequence(last)
}

// migrateV4 adds the bucket of sealed secrets (pkg/secret).
func migrateV4(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bSecrets); err != nil {
		return fmt.Errorf("creating bucket %s: %w", bSecrets, err)
	}
	return nil
}

// migrateV5 adds telemetry's buckets: each machine's state (last sample,
// alerts) and its power days.
func migrateV5(tx *bbolt.Tx) error {
	for _, name := range [][]byte{bTelemetry, bPowerDays} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("creating bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV6 adds telemetry's daily power summaries (a year of them).
func migrateV6(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bPowerSums); err != nil {
		return fmt.Errorf("creating bucket %s: %w", bPowerSums, err)
	}
	return nil
}

// migrateV7 adds the fences that conditional writes check (store.FenceStore).
func migrateV7(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bFences); err != nil {
		return fmt.Errorf("creating bucket %s: %w", bFences, err)
	}
	return nil
}

// migrateV8 indexes jobs by state and tokens by scope and by job, so the
// running jobs and a machine's credentials are found without decoding
// every job and token ever stored.
func migrateV8(tx *bbolt.Tx) error {
	for _, name := range [][]byte{bIdxJobState, bIdxTokenScope, bIdxTokenJob} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("creating bucket %s: %w", name, err)
		}
	}
	err := tx.Bucket(bJobs).ForEach(func(k, v []byte) error {
		var j store.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("decoding job %s: %w", k, err)
		}
		return indexJob(tx, nil, &j)
	})
	if err != nil {
		return err
	}
	return tx.Bucket(bTokens).ForEach(func(k, v []byte) error {
		var t store.Token
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("decoding token: %w", err)
		}
		return indexToken(tx, nil, &t)
	})
}
