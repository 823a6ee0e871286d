package etcd

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/store"
)

// PutTelemetry writes nodes and days, replacing the records of the same
// machine (and day).
//
// Atomicity is per machine, not per batch: a batch is split into
// transactions under etcd's limits (128 operations, about 1 MiB), each
// holding whole machines (a machine's state and its days together). A
// flush for 500 machines (a state and one or two days each, a few KiB a
// day) is several MiB, more than one etcd request may carry. This is what
// telemetry needs: it restores each machine from that machine's records
// alone (pkg/telemetry restore), so a crash between two transactions
// leaves every machine at this flush or at the one before, never a state
// from one and days from another. A batch is checked whole before
// anything is written: an invalid record writes nothing.
func (s *Store) PutTelemetry(ctx context.Context, nodes []store.NodeTelemetry, days []store.PowerDay) error {
	err := s.putTelemetry(ctx, nodes, days, s.k.powerDays())
	if err != nil {
		return fmt.Errorf("storing telemetry of %d machines: %w", len(nodes), err)
	}
	return nil
}

// PutPowerSummaries writes daily summaries, atomically per machine (see
// PutTelemetry).
func (s *Store) PutPowerSummaries(ctx context.Context, days []store.PowerDay) error {
	if err := s.putTelemetry(ctx, nil, days, s.k.powerSums()); err != nil {
		return fmt.Errorf("storing %d daily power summaries: %w", len(days), err)
	}
	return nil
}

// telemetryWrite is one key and value of a telemetry batch.
type telemetryWrite struct{ key, val string }

// putTelemetry checks the batch, groups its writes by machine and commits
// them in transactions of whole machines.
func (s *Store) putTelemetry(ctx context.Context, nodes []store.NodeTelemetry, days []store.PowerDay, dayPrefix string) error {
	byMachine := map[string][]telemetryWrite{}
	var order []string
	add := func(m string, w telemetryWrite) {
		if _, ok := byMachine[m]; !ok {
			order = append(order, m)
		}
		byMachine[m] = append(byMachine[m], w)
	}
	for _, n := range nodes {
		if n.Machine == "" || strings.Contains(n.Machine, "/") {
			return fmt.Errorf("telemetry of machine %q: expected a machine ID", n.Machine)
		}
		add(n.Machine, telemetryWrite{s.k.node(n.Machine), string(n.State)})
	}
	for _, d := range days {
		if d.Machine == "" || strings.Contains(d.Machine, "/") || len(d.Day) != len("2006-01-02") {
			return fmt.Errorf("power day %q of machine %q: expected a machine ID and a YYYY-MM-DD day", d.Day, d.Machine)
		}
		add(d.Machine, telemetryWrite{day(dayPrefix, d.Machine, d.Day), string(d.Buckets)})
	}
	for len(order) > 0 {
		n, err := s.putMachines(ctx, order, byMachine)
		if err != nil {
			return err
		}
		order = order[n:]
	}
	return nil
}

// putMachines writes the first machines of order that fit one transaction
// (at least one) and returns how many it wrote.
func (s *Store) putMachines(ctx context.Context, order []string, byMachine map[string][]telemetryWrite) (int, error) {
	n := 0
	_, err := s.update(ctx, func(t *tx) error {
		n = 0
		for _, m := range order {
			ws := byMachine[m]
			size := 0
			for _, w := range ws {
				size += len(w.key) + len(w.val)
			}
			if n > 0 && !t.fits(len(ws), 0, size) {
				break
			}
			for _, w := range ws {
				t.put(w.key, []byte(w.val))
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("machine %s: %w", order[0], err)
	}
	return n, nil
}

// ListNodeTelemetry returns every machine's state, sorted by machine.
func (s *Store) ListNodeTelemetry(ctx context.Context) ([]store.NodeTelemetry, error) {
	var out []store.NodeTelemetry
	err := s.view(ctx, func(t *tx) error {
		out = nil
		return t.scanPrefix(s.k.nodes(), false, func(kv *mvccpb.KeyValue) error {
			out = append(out, store.NodeTelemetry{Machine: strings.TrimPrefix(string(kv.Key), s.k.nodes()), State: kv.Value})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing telemetry: %w", err)
	}
	return out, nil
}

// PowerDays returns a machine's days from from ("" all), sorted by day.
func (s *Store) PowerDays(ctx context.Context, machineID, from string) ([]store.PowerDay, error) {
	out, err := s.days(ctx, s.k.powerDays(), machineID, from)
	if err != nil {
		return nil, fmt.Errorf("reading power days of %s: %w", machineID, err)
	}
	return out, nil
}

// PowerSummaries returns a machine's daily summaries from from ("" all).
func (s *Store) PowerSummaries(ctx context.Context, machineID, from string) ([]store.PowerDay, error) {
	out, err := s.days(ctx, s.k.powerSums(), machineID, from)
	if err != nil {
		return nil, fmt.Errorf("reading daily power summaries of %s: %w", machineID, err)
	}
	return out, nil
}

func (s *Store) days(ctx context.Context, prefix, machineID, from string) ([]store.PowerDay, error) {
	var out []store.PowerDay
	mp := prefix + machineID + "/"
	err := s.view(ctx, func(t *tx) error {
		out = nil
		return t.scan(mp+from, prefixEnd(mp), false, func(kv *mvccpb.KeyValue) error {
			out = append(out, store.PowerDay{Machine: machineID, Day: strings.TrimPrefix(string(kv.Key), mp), Buckets: kv.Value})
			return nil
		})
	})
	return out, err
}

// DeletePowerDaysBefore drops every machine's days before day.
func (s *Store) DeletePowerDaysBefore(ctx context.Context, day string) (int, error) {
	n, err := s.deleteDaysBefore(ctx, s.k.powerDays(), day)
	if err != nil {
		return n, fmt.Errorf("dropping power days before %s: %w", day, err)
	}
	return n, nil
}

// DeletePowerSummariesBefore drops every machine's summaries before day.
func (s *Store) DeletePowerSummariesBefore(ctx context.Context, day string) (int, error) {
	n, err := s.deleteDaysBefore(ctx, s.k.powerSums(), day)
	if err != nil {
		return n, fmt.Errorf("dropping daily power summaries before %s: %w", day, err)
	}
	return n, nil
}

// deleteDaysBefore finds the days before day (one scan, keys only) and
// deletes them in transactions of up to maxOps keys. Atomicity is per
// transaction, not per call: a deletion is idempotent, so a crash halfway
// leaves old days that the next call (telemetry prunes on every flush)
// deletes; no reader is misled by a day that should be gone.
func (s *Store) deleteDaysBefore(ctx context.Context, prefix, day string) (int, error) {
	var old []string
	err := s.view(ctx, func(t *tx) error {
		old = nil
		return t.scanPrefix(prefix, true, func(kv *mvccpb.KeyValue) error {
			k := string(kv.Key)
			if i := strings.LastIndexByte(k, '/'); i >= 0 && k[i+1:] < day {
				old = append(old, k)
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for len(old) > 0 {
		chunk := old[:min(len(old), maxOps)]
		if _, err := s.update(ctx, func(t *tx) error {
			for _, k := range chunk {
				t.del(k)
			}
			return nil
		}); err != nil {
			return n, err
		}
		n += len(chunk)
		old = old[len(chunk):]
	}
	return n, nil
}

// DeleteTelemetry removes a machine's state, days and summaries in one
// transaction.
func (s *Store) DeleteTelemetry(ctx context.Context, machineID string) error {
	_, err := s.update(ctx, func(t *tx) error {
		t.del(s.k.node(machineID))
		t.delPrefix(s.k.powerDays() + machineID + "/")
		t.delPrefix(s.k.powerSums() + machineID + "/")
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting telemetry of %s: %w", machineID, err)
	}
	return nil
}
