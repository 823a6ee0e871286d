package backends

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// Migration is what Migrate did.
type Migration struct {
	// Records counts the records of the source by kind (machine, event,
	// inventory, lease, job, token, secret, telemetry, power-day,
	// power-summary, fence, counters).
	Records map[string]int
	// Done: the target already held exactly the source's records (a
	// second run), and nothing was written.
	Done bool
}

// Total is how many records the source holds.
func (m Migration) Total() int {
	n := 0
	for _, c := range m.Records {
		n += c
	}
	return n
}

// Migrate copies the store at from into the store at to (any two
// backends, e.g. a bbolt file into an etcd prefix), offline: the source's
// portable backup (Maintainer.Backup) is restored into the target
// (Backend.Restore), then the target's own backup is read back and
// compared with the source record by record: IDs, sequence numbers,
// counters, timestamps, sealed secrets and fences must be equal; revisions
// are each backend's own and are not compared. The target must be empty:
// when it already holds exactly the source's records (a second run), it
// does nothing and says so; when it holds anything else, it refuses and
// writes nothing, so a migration never duplicates or merges.
func Migrate(ctx context.Context, from, to string, opts store.Options) (Migration, error) {
	dir, err := os.MkdirTemp("", "ingot-migrate-")
	if err != nil {
		return Migration{}, fmt.Errorf("migrating: %w", err)
	}
	defer os.RemoveAll(dir)
	src, err := snapshot(ctx, from, filepath.Join(dir, "source.db"), opts)
	if err != nil {
		return Migration{}, fmt.Errorf("migrating from %s: %w", store.Redact(from), err)
	}
	want, err := records(ctx, src)
	if err != nil {
		return Migration{}, fmt.Errorf("migrating from %s: %w", store.Redact(from), err)
	}
	m := Migration{Records: kinds(want)}
	have, err := snapshotRecords(ctx, to, filepath.Join(dir, "target-before.db"), opts)
	if err != nil {
		return m, fmt.Errorf("migrating to %s: %w", store.Redact(to), err)
	}
	if len(have) > 0 {
		d := diff(want, have)
		if len(d) == 0 {
			m.Done = true
			return m, nil
		}
		return m, fmt.Errorf("migrating to %s: the target holds %d records, and they are not the source's (%s): a migration writes only into an empty store; nothing was written",
			store.Redact(to), len(have), strings.Join(d[:min(len(d), 5)], "; "))
	}
	f, err := os.Open(src)
	if err != nil {
		return m, err
	}
	_, err = Registry().Restore(ctx, to, f, opts)
	f.Close()
	if err != nil {
		return m, fmt.Errorf("migrating to %s: %w", store.Redact(to), err)
	}
	got, err := snapshotRecords(ctx, to, filepath.Join(dir, "target-after.db"), opts)
	if err != nil {
		return m, fmt.Errorf("checking the copy in %s: %w", store.Redact(to), err)
	}
	if d := diff(want, got); len(d) > 0 {
		return m, fmt.Errorf("checking the copy in %s: %d records differ from the source: %s", store.Redact(to), len(d), strings.Join(d[:min(len(d), 10)], "; "))
	}
	return m, nil
}

// snapshot writes the portable backup of the store at location to path.
func snapshot(ctx context.Context, location, path string, opts store.Options) (string, error) {
	st, err := Open(ctx, location, opts)
	if err != nil {
		return "", err
	}
	defer st.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = st.Backup(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return path, err
}

// snapshotRecords is the records of the store at location.
func snapshotRecords(ctx context.Context, location, path string, opts store.Options) (map[string]string, error) {
	p, err := snapshot(ctx, location, path, opts)
	if err != nil {
		return nil, err
	}
	return records(ctx, p)
}

// records reads a portable backup into key -> canonical record.
func records(ctx context.Context, path string) (map[string]string, error) {
	r := recorder{}
	if err := bolt.ReadFile(ctx, path, r); err != nil {
		return nil, err
	}
	return r, nil
}

// kinds counts records by the kind their key starts with.
func kinds(recs map[string]string) map[string]int {
	out := map[string]int{}
	for k := range recs {
		kind, _, _ := strings.Cut(k, " ")
		out[kind]++
	}
	return out
}

// diff names the keys that differ between want and got, sorted.
func diff(want, got map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, k+" is missing")
		case g != want[k]:
			out = append(out, k+" differs")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			out = append(out, k+" is not in the source")
		}
	}
	return out
}

// recorder keeps each record of a portable backup as canonical JSON under
// "KIND NAME" (a token is named by its ID: its hash is a credential),
// revisions left out.
type recorder map[string]string

var _ bolt.Records = recorder{}

func (r recorder) put(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r[key] = string(raw)
	return nil
}

func (r recorder) Machine(m machine.Machine, _ uint64) error { return r.put("machine "+m.ID, m) }
func (r recorder) Inventory(sn store.Snapshot) error {
	return r.put(fmt.Sprintf("inventory %s/%d", sn.MachineID, sn.Seq), sn)
}
func (r recorder) Event(ev machine.Event) error {
	return r.put(fmt.Sprintf("event %s/%d", ev.Machine, ev.Seq), ev)
}
func (r recorder) Counters(id string, inv, evs uint64) error {
	if inv == 0 && evs == 0 {
		return nil // no history yet: a backend may keep no counter at all
	}
	return r.put("counters "+id, [2]uint64{inv, evs})
}
func (r recorder) Lease(l store.Lease) error { return r.put("lease "+l.MAC, l) }
func (r recorder) Job(j store.Job) error {
	j.Revision = 0 // each backend's own
	return r.put("job "+j.ID, j)
}
func (r recorder) Token(t store.Token) error   { return r.put("token "+t.ID, t) }
func (r recorder) Secret(s store.Secret) error { return r.put("secret "+s.Name, s) }
func (r recorder) NodeTelemetry(n store.NodeTelemetry) error {
	return r.put("telemetry "+n.Machine, n)
}
func (r recorder) PowerDay(d store.PowerDay) error {
	return r.put("power-day "+d.Machine+"/"+d.Day, d)
}
func (r recorder) PowerSummary(d store.PowerDay) error {
	return r.put("power-summary "+d.Machine+"/"+d.Day, d)
}
func (r recorder) Fence(key, value string) error { return r.put("fence "+key, value) }
