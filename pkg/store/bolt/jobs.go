package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

// CreateJob stores a new job (see JobStore and NewJobRecord); an empty ID
// is generated ("j-" + 10 hex characters), an empty State becomes pending,
// Created/Updated and Revision are set, and j is updated in place.
func (b *Store) CreateJob(ctx context.Context, j *store.Job) error {
	c, err := store.NewJobRecord(j, b.opts.Now())
	if err != nil {
		return fmt.Errorf("creating job: %w", err)
	}
	err = b.update(ctx, func(tx *bbolt.Tx) error {
		jobs := tx.Bucket(bJobs)
		if jobs.Get([]byte(c.ID)) != nil {
			return store.ErrExists
		}
		return putJob(jobs, &c)
	})
	if err != nil {
		return fmt.Errorf("creating job %s: %w", c.ID, err)
	}
	*j = c
	return nil
}

// putJob stores j with the next job revision (the jobs bucket's sequence is
// the last one handed out).
func putJob(jobs *bbolt.Bucket, j *store.Job) error {
	j.Revision = store.NextRevision(jobs.Sequence())
	if err := jobs.SetSequence(j.Revision); err != nil {
		return err
	}
	return putJSON(jobs, []byte(j.ID), j)
}

// GetJob returns the job with this ID.
func (b *Store) GetJob(ctx context.Context, id string) (*store.Job, error) {
	var j *store.Job
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		j, err = getJob(tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading job %s: %w", id, err)
	}
	return j, nil
}

func getJob(tx *bbolt.Tx, id string) (*store.Job, error) {
	var j store.Job
	ok, err := getJSON(tx.Bucket(bJobs), []byte(id), &j)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrNotFound
	}
	return &j, nil
}

// ListJobs returns jobs in the given state ("" = all), oldest first.
func (b *Store) ListJobs(ctx context.Context, state store.JobState) ([]store.Job, error) {
	var out []store.Job
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bJobs).ForEach(func(k, v []byte) error {
			var j store.Job
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("decoding job %s: %w", k, err)
			}
			if state == "" || j.State == state {
				out = append(out, j)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	store.SortJobs(out)
	return out, nil
}

// UpdateJob runs fn on a copy of the job and stores the result, with the
// next revision, in the same transaction; an error from fn aborts.
func (b *Store) UpdateJob(ctx context.Context, id string, fn func(*store.Job) error) (*store.Job, error) {
	return b.updateJob(ctx, id, nil, fn)
}

// UpdateJobRev is UpdateJob if the job is at revision rev; ErrStale, and
// nothing written, if it is not.
func (b *Store) UpdateJobRev(ctx context.Context, id string, rev uint64, fn func(*store.Job) error) (*store.Job, error) {
	return b.updateJob(ctx, id, &rev, fn)
}

func (b *Store) updateJob(ctx context.Context, id string, want *uint64, fn func(*store.Job) error) (*store.Job, error) {
	var out *store.Job
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		old, err := getJob(tx, id)
		if err != nil {
			return err
		}
		if want != nil {
			if err := store.CheckRevision("job "+id, old.Revision, *want); err != nil {
				return err
			}
		}
		j, err := store.UpdatedJobRecord(old, fn, b.opts.Now())
		if err != nil {
			return err
		}
		out = &j
		return putJob(tx.Bucket(bJobs), &j)
	})
	if err != nil {
		return nil, fmt.Errorf("updating job %s: %w", id, err)
	}
	return out, nil
}

// PutToken stores t keyed by its hash (replacing a token with the same hash,
// which is how revocation is written).
func (b *Store) PutToken(ctx context.Context, t store.Token) error {
	rec, err := store.NewTokenRecord(t, b.opts.Now())
	if err != nil {
		return fmt.Errorf("storing token %s: %w", t.Name, err)
	}
	err = b.update(ctx, func(tx *bbolt.Tx) error {
		return putJSON(tx.Bucket(bTokens), []byte(rec.Hash), &rec)
	})
	if err != nil {
		return fmt.Errorf("storing token %s: %w", t.Name, err)
	}
	return nil
}

// TokenByHash returns the token whose secret hashes to hash.
func (b *Store) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	var t store.Token
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bTokens), []byte(hash), &t)
		if err == nil && !ok {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading token: %w", err) // never echo the hash
	}
	return &t, nil
}

// DeleteToken removes the token stored under hash.
func (b *Store) DeleteToken(ctx context.Context, hash string) error {
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		bk := tx.Bucket(bTokens)
		if bk.Get([]byte(hash)) == nil {
			return store.ErrNotFound
		}
		return bk.Delete([]byte(hash))
	})
	if err != nil {
		return fmt.Errorf("deleting token: %w", err) // never echo the hash
	}
	return nil
}

// ListTokens returns every token, oldest first.
func (b *Store) ListTokens(ctx context.Context) ([]store.Token, error) {
	var out []store.Token
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bTokens).ForEach(func(k, v []byte) error {
			var t store.Token
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decoding token: %w", err)
			}
			out = append(out, t)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	slices.SortStableFunc(out, func(a, b store.Token) int { return a.Created.Compare(b.Created) })
	return out, nil
}
