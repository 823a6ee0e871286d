package bolt

import (
	"bytes"
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

func dayKey(machine, day string) []byte { return []byte(machine + "/" + day) }

// putDays puts machine/day records into bk.
func putDays(bk *bbolt.Bucket, days []store.PowerDay) error {
	for _, d := range days {
		if err := store.CheckPowerDay(d); err != nil {
			return err
		}
		if err := bk.Put(dayKey(d.Machine, d.Day), d.Buckets); err != nil {
			return err
		}
	}
	return nil
}

// PutPowerSummaries writes daily summaries in one transaction.
func (b *Store) PutPowerSummaries(ctx context.Context, days []store.PowerDay) error {
	if err := b.update(ctx, func(tx *bbolt.Tx) error { return putDays(tx.Bucket(bPowerSums), days) }); err != nil {
		return fmt.Errorf("storing %d daily power summaries: %w", len(days), err)
	}
	return nil
}

// PowerSummaries returns a machine's daily summaries from from ("" all).
func (b *Store) PowerSummaries(ctx context.Context, machineID, from string) ([]store.PowerDay, error) {
	out, err := b.days(ctx, bPowerSums, machineID, from)
	if err != nil {
		return nil, fmt.Errorf("reading daily power summaries of %s: %w", machineID, err)
	}
	return out, nil
}

// DeletePowerSummariesBefore drops every machine's summaries before day.
func (b *Store) DeletePowerSummariesBefore(ctx context.Context, day string) (int, error) {
	n, err := b.deleteDaysBefore(ctx, bPowerSums, day)
	if err != nil {
		return 0, fmt.Errorf("dropping daily power summaries before %s: %w", day, err)
	}
	return n, nil
}

// PutTelemetry writes nodes and days in one transaction.
func (b *Store) PutTelemetry(ctx context.Context, nodes []store.NodeTelemetry, days []store.PowerDay) error {
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		nb, db := tx.Bucket(bTelemetry), tx.Bucket(bPowerDays)
		for _, n := range nodes {
			if err := store.CheckNodeTelemetry(n); err != nil {
				return err
			}
			if err := nb.Put([]byte(n.Machine), n.State); err != nil {
				return err
			}
		}
		return putDays(db, days)
	})
	if err != nil {
		return fmt.Errorf("storing telemetry of %d machines: %w", len(nodes), err)
	}
	return nil
}

// ListNodeTelemetry returns every machine's telemetry state.
func (b *Store) ListNodeTelemetry(ctx context.Context) ([]store.NodeTelemetry, error) {
	var out []store.NodeTelemetry
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bTelemetry).ForEach(func(k, v []byte) error {
			out = append(out, store.NodeTelemetry{Machine: string(k), State: copyBytes(v)})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing telemetry: %w", err)
	}
	return out, nil
}

// PowerDays returns a machine's days from from ("" all).
func (b *Store) PowerDays(ctx context.Context, machineID, from string) ([]store.PowerDay, error) {
	out, err := b.days(ctx, bPowerDays, machineID, from)
	if err != nil {
		return nil, fmt.Errorf("reading power days of %s: %w", machineID, err)
	}
	return out, nil
}

func (b *Store) days(ctx context.Context, bucket []byte, machineID, from string) ([]store.PowerDay, error) {
	var out []store.PowerDay
	prefix := []byte(machineID + "/")
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek(append(append([]byte{}, prefix...), from...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			out = append(out, store.PowerDay{Machine: machineID, Day: string(k[len(prefix):]), Buckets: copyBytes(v)})
		}
		return nil
	})
	return out, err
}

// DeletePowerDaysBefore drops every machine's days before day.
func (b *Store) DeletePowerDaysBefore(ctx context.Context, day string) (int, error) {
	n, err := b.deleteDaysBefore(ctx, bPowerDays, day)
	if err != nil {
		return 0, fmt.Errorf("dropping power days before %s: %w", day, err)
	}
	return n, nil
}

func (b *Store) deleteDaysBefore(ctx context.Context, bucket []byte, day string) (int, error) {
	n := 0
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		bk := tx.Bucket(bucket)
		var old [][]byte
		err := bk.ForEach(func(k, _ []byte) error {
			if i := bytes.LastIndexByte(k, '/'); i >= 0 && string(k[i+1:]) < day {
				old = append(old, copyBytes(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := bk.Delete(k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}

// DeleteTelemetry removes a machine's state, days and summaries.
func (b *Store) DeleteTelemetry(ctx context.Context, machineID string) error {
	prefix := []byte(machineID + "/")
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bTelemetry).Delete([]byte(machineID)); err != nil {
			return err
		}
		for _, name := range [][]byte{bPowerDays, bPowerSums} {
			bk := tx.Bucket(name)
			c := bk.Cursor()
			var ks [][]byte
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				ks = append(ks, copyBytes(k))
			}
			for _, k := range ks {
				if err := bk.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting telemetry of %s: %w", machineID, err)
	}
	return nil
}
