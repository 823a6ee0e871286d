package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// The portable backup (store.Maintainer.Backup) is a bbolt file of this
// backend's layout. Another backend writes one with Writer and reads one
// with ReadFile, through Records, so the layout is written down here only:
// an etcd backup, `ingot admin migrate` and an etcd restore share it.

// Records takes a store's records as they are stored: IDs, sequence
// numbers, timestamps and revisions kept, nothing checked or renumbered
// (a raw import). ReadFile calls it machines first, then each machine's
// inventories, events and counters, then leases, jobs, tokens, secrets,
// telemetry and fences.
type Records interface {
	Machine(m machine.Machine, rev uint64) error
	Inventory(sn store.Snapshot) error
	Event(ev machine.Event) error
	// Counters are the last inventory and event seq handed out to a
	// machine (above its newest record when newer ones were trimmed).
	Counters(machineID string, inventory, events uint64) error
	Lease(l store.Lease) error
	Job(j store.Job) error
	Token(t store.Token) error
	Secret(s store.Secret) error
	NodeTelemetry(n store.NodeTelemetry) error
	PowerDay(d store.PowerDay) error
	PowerSummary(d store.PowerDay) error
	Fence(key, value string) error
}

// Writer writes a portable backup file (Records): the buckets of the
// current schema, filled raw, with every index this backend keeps
// (names, MACs, serials, BMCs, lease IPs, job states, token scopes and
// jobs) built from the records. Writes are grouped in transactions of
// writerBatch records and synced once, at Close.
type Writer struct {
	path string
	db   *bbolt.DB
	tx   *bbolt.Tx
	n    int
	rev  uint64 // greatest revision written
}

var _ Records = (*Writer)(nil)

// writerBatch is how many records one transaction of a Writer holds.
const writerBatch = 2000

// NewWriter creates the file at path (which must not exist) at the current
// schema, ready for records.
func NewWriter(path string) (*Writer, error) {
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("writing a backup to %s: the file exists", path)
	}
	empty, err := Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("writing a backup to %s: %w", path, err)
	}
	if err := empty.Close(); err != nil {
		return nil, fmt.Errorf("writing a backup to %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		return nil, fmt.Errorf("writing a backup to %s: %w", path, err)
	}
	return &Writer{path: path, db: db}, nil
}

// do runs fn in the open transaction, committing it every writerBatch
// records.
func (w *Writer) do(what string, fn func(tx *bbolt.Tx) error) error {
	if w.tx == nil {
		tx, err := w.db.Begin(true)
		if err != nil {
			return fmt.Errorf("writing %s to %s: %w", what, w.path, err)
		}
		w.tx = tx
	}
	if err := fn(w.tx); err != nil {
		return fmt.Errorf("writing %s to %s: %w", what, w.path, err)
	}
	if w.n++; w.n%writerBatch == 0 {
		return w.flush()
	}
	return nil
}

func (w *Writer) flush() error {
	if w.tx == nil {
		return nil
	}
	tx := w.tx
	w.tx = nil
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("writing %s: %w", w.path, err)
	}
	return nil
}

// Machine writes m, its unique keys and its revision.
func (w *Writer) Machine(m machine.Machine, rev uint64) error {
	w.rev = max(w.rev, rev)
	return w.do("machine "+m.Name, func(tx *bbolt.Tx) error {
		if err := putIndexes(tx, &m); err != nil {
			return err
		}
		if err := tx.Bucket(bMachRev).Put([]byte(m.ID), u64(rev)); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bMachines), []byte(m.ID), &m)
	})
}

// Inventory writes a snapshot under its machine and seq.
func (w *Writer) Inventory(sn store.Snapshot) error {
	return w.do("an inventory of "+sn.MachineID, func(tx *bbolt.Tx) error {
		bk, err := tx.Bucket(bInventory).CreateBucketIfNotExists([]byte(sn.MachineID))
		if err != nil {
			return err
		}
		return putJSON(bk, u64(sn.Seq), &sn)
	})
}

// Event writes an event under its machine and seq.
func (w *Writer) Event(ev machine.Event) error {
	return w.do("an event of "+ev.Machine, func(tx *bbolt.Tx) error {
		bk, err := tx.Bucket(bEvents).CreateBucketIfNotExists([]byte(ev.Machine))
		if err != nil {
			return err
		}
		return putJSON(bk, u64(ev.Seq), &ev)
	})
}

// Counters sets a machine's last inventory and event seqs.
func (w *Writer) Counters(id string, inventory, events uint64) error {
	return w.do("the counters of "+id, func(tx *bbolt.Tx) error {
		for parent, n := range map[string]uint64{string(bInventory): inventory, string(bEvents): events} {
			if n == 0 {
				continue
			}
			bk, err := tx.Bucket([]byte(parent)).CreateBucketIfNotExists([]byte(id))
			if err != nil {
				return err
			}
			if err := bk.SetSequence(n); err != nil {
				return err
			}
		}
		return nil
	})
}

// Lease writes l and its IP index entry.
func (w *Writer) Lease(l store.Lease) error {
	return w.do("the lease of "+l.MAC, func(tx *bbolt.Tx) error { return applyLeaseOp(tx, leaseOp{Put: &l}) })
}

// Job writes j with its revision and its state index entry.
func (w *Writer) Job(j store.Job) error {
	w.rev = max(w.rev, j.Revision)
	return w.do("job "+j.ID, func(tx *bbolt.Tx) error {
		if err := indexJob(tx, nil, &j); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bJobs), []byte(j.ID), &j)
	})
}

// Token writes t and its index entries.
func (w *Writer) Token(t store.Token) error {
	return w.do("a token", func(tx *bbolt.Tx) error { // never name the hash
		if err := indexToken(tx, nil, &t); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bTokens), []byte(t.Hash), &t)
	})
}

// Secret writes a sealed secret as it is.
func (w *Writer) Secret(s store.Secret) error {
	return w.do("secret "+s.Name, func(tx *bbolt.Tx) error { return putJSON(tx.Bucket(bSecrets), []byte(s.Name), &s) })
}

// NodeTelemetry writes a machine's telemetry state.
func (w *Writer) NodeTelemetry(n store.NodeTelemetry) error {
	return w.do("the telemetry of "+n.Machine, func(tx *bbolt.Tx) error {
		return tx.Bucket(bTelemetry).Put([]byte(n.Machine), n.State)
	})
}

// PowerDay writes one machine's power day.
func (w *Writer) PowerDay(d store.PowerDay) error {
	return w.do("a power day of "+d.Machine, func(tx *bbolt.Tx) error {
		return tx.Bucket(bPowerDays).Put(dayKey(d.Machine, d.Day), d.Buckets)
	})
}

// PowerSummary writes one machine's daily power summary.
func (w *Writer) PowerSummary(d store.PowerDay) error {
	return w.do("a power summary of "+d.Machine, func(tx *bbolt.Tx) error {
		return tx.Bucket(bPowerSums).Put(dayKey(d.Machine, d.Day), d.Buckets)
	})
}

// Fence writes a fence.
func (w *Writer) Fence(key, value string) error {
	return w.do("fence "+key, func(tx *bbolt.Tx) error { return tx.Bucket(bFences).Put([]byte(key), []byte(value)) })
}

// Close sets the file's machine and job revision counters at floor (or the
// greatest revision written, if higher: a revision handed out after a
// restore is above every one in the file), syncs and closes the file.
func (w *Writer) Close(floor uint64) error {
	err := w.do("the revision counters", func(tx *bbolt.Tx) error {
		rev := max(floor, w.rev)
		if err := tx.Bucket(bMachRev).SetSequence(rev); err != nil {
			return err
		}
		return tx.Bucket(bJobs).SetSequence(rev)
	})
	if err == nil {
		err = w.flush()
	}
	if err == nil {
		err = w.db.Sync()
	}
	if w.tx != nil {
		_ = w.tx.Rollback()
	}
	if cerr := w.db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", w.path, cerr)
	}
	return err
}

// ReadFile reads the portable backup at path into to, in the order
// Records says. The file is opened as Open opens any (a damaged one is
// named, an older schema migrated) on a copy, so path is never changed.
func ReadFile(ctx context.Context, path string, to Records) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".ingot-read-")
	if err != nil {
		dir, err = os.MkdirTemp("", "ingot-read-")
	}
	if err != nil {
		return fmt.Errorf("reading backup %s: %w", path, err)
	}
	defer os.RemoveAll(dir)
	src, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading backup %s: %w", path, err)
	}
	cp := filepath.Join(dir, "ingot.db")
	err = copyToFile(cp, src)
	src.Close()
	if err != nil {
		return fmt.Errorf("reading backup %s: copying it: %w", path, err)
	}
	s, err := Open(cp, store.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("reading backup %s: %w", path, err)
	}
	defer s.Close()
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		for _, step := range readSteps {
			if err := step(tx, to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading backup %s: %w", path, err)
	}
	return nil
}

// readSteps read each kind of record of a file, in Records' order.
var readSteps = []func(tx *bbolt.Tx, to Records) error{
	readMachines, readHistory, readLeases, readJobs, readTokens, readSecrets, readTelemetry, readFences,
}

func readMachines(tx *bbolt.Tx, to Records) error {
	return tx.Bucket(bMachines).ForEach(func(k, v []byte) error {
		var m machine.Machine
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("decoding machine %s: %w", k, err)
		}
		return to.Machine(m, machineRev(tx, m.ID))
	})
}

// readHistory reads each machine's inventories, events and counters.
func readHistory(tx *bbolt.Tx, to Records) error {
	return tx.Bucket(bMachines).ForEach(func(id, _ []byte) error {
		var counters [2]uint64
		for i, parent := range [][]byte{bInventory, bEvents} {
			bk := tx.Bucket(parent).Bucket(id)
			if bk == nil {
				continue
			}
			counters[i] = bk.Sequence()
			err := bk.ForEach(func(k, v []byte) error {
				if i == 0 {
					var sn store.Snapshot
					if err := json.Unmarshal(v, &sn); err != nil {
						return fmt.Errorf("decoding inventory %x of %s: %w", k, id, err)
					}
					return to.Inventory(sn)
				}
				var ev machine.Event
				if err := json.Unmarshal(v, &ev); err != nil {
					return fmt.Errorf("decoding event %x of %s: %w", k, id, err)
				}
				return to.Event(ev)
			})
			if err != nil {
				return err
			}
		}
		return to.Counters(string(id), counters[0], counters[1])
	})
}

// readJSON decodes every value of bucket into a T and hands it to fn.
func readJSON[T any](tx *bbolt.Tx, bucket []byte, fn func(T) error) error {
	return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		var rec T
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("decoding a record of %s: %w", bucket, err) // tokens: never name the key
		}
		return fn(rec)
	})
}

func readJobs(tx *bbolt.Tx, to Records) error    { return readJSON(tx, bJobs, to.Job) }
func readTokens(tx *bbolt.Tx, to Records) error  { return readJSON(tx, bTokens, to.Token) }
func readSecrets(tx *bbolt.Tx, to Records) error { return readJSON(tx, bSecrets, to.Secret) }

func readLeases(tx *bbolt.Tx, to Records) error {
	var ls []store.Lease
	if err := readJSON(tx, bLeases, func(l store.Lease) error { ls = append(ls, l); return nil }); err != nil {
		return err
	}
	return Leases(ls, to)
}

// Leases hands ls to to oldest Updated first, as every reader of a store
// does: where two leases (one expired) name one IP, the later write took
// the IP's index entry, and a writer that indexes in the order given does
// the same.
func Leases(ls []store.Lease, to Records) error {
	slices.SortStableFunc(ls, func(a, b store.Lease) int { return a.Updated.Compare(b.Updated) })
	for _, l := range ls {
		if err := to.Lease(l); err != nil {
			return err
		}
	}
	return nil
}

func readTelemetry(tx *bbolt.Tx, to Records) error {
	err := tx.Bucket(bTelemetry).ForEach(func(k, v []byte) error {
		return to.NodeTelemetry(store.NodeTelemetry{Machine: string(k), State: copyBytes(v)})
	})
	if err != nil {
		return err
	}
	for _, b := range []struct {
		bucket []byte
		fn     func(store.PowerDay) error
	}{{bPowerDays, to.PowerDay}, {bPowerSums, to.PowerSummary}} {
		bucket, fn := b.bucket, b.fn
		err := tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			m, d, ok := cutDayKey(k)
			if !ok {
				return fmt.Errorf("%s key %q: expected MACHINE/DAY", bucket, k)
			}
			return fn(store.PowerDay{Machine: m, Day: d, Buckets: copyBytes(v)})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// cutDayKey splits a power day key MACHINE/DAY (a day has no slash).
func cutDayKey(k []byte) (string, string, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			return string(k[:i]), string(k[i+1:]), i > 0 && i < len(k)-1
		}
	}
	return "", "", false
}

func readFences(tx *bbolt.Tx, to Records) error {
	return tx.Bucket(bFences).ForEach(func(k, v []byte) error { return to.Fence(string(k), string(v)) })
}
