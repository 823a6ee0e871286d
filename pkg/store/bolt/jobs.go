package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
		if err := indexJob(tx, nil, &c); err != nil {
			return err
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

// ListJobs returns jobs in the given state ("" = all), oldest first; a
// state is read through its index, not by decoding every job.
func (b *Store) ListJobs(ctx context.Context, state store.JobState) ([]store.Job, error) {
	var out []store.Job
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		if state == "" {
			return tx.Bucket(bJobs).ForEach(func(k, v []byte) error {
				var j store.Job
				if err := json.Unmarshal(v, &j); err != nil {
					return fmt.Errorf("decoding job %s: %w", k, err)
				}
				out = append(out, j)
				return nil
			})
		}
		return scanIndex(tx.Bucket(bIdxJobState), string(state), func(id []byte) error {
			j, err := getJob(tx, string(id))
			if err != nil {
				return fmt.Errorf("job %s of the %s index: %w", id, state, err)
			}
			out = append(out, *j)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	store.SortJobs(out)
	return out, nil
}

// indexJob moves j's entry of the state index from old's state (nil: a
// new job).
func indexJob(tx *bbolt.Tx, old, j *store.Job) error {
	idx := tx.Bucket(bIdxJobState)
	if old != nil {
		if err := idx.Delete(indexKey(string(old.State), old.ID)); err != nil {
			return err
		}
	}
	return idx.Put(indexKey(string(j.State), j.ID), nil)
}

// indexKey is VALUE/ID: an index entry scanned by the prefix VALUE/.
func indexKey(value, id string) []byte { return []byte(value + "/" + id) }

// scanIndex calls fn with the ID of every entry of value.
func scanIndex(idx *bbolt.Bucket, value string, fn func(id []byte) error) error {
	prefix := []byte(value + "/")
	c := idx.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if err := fn(k[len(prefix):]); err != nil {
			return err
		}
	}
	return nil
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
		if err := indexJob(tx, old, &j); err != nil {
			return err
		}
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
		var old store.Token
		ok, err := getJSON(tx.Bucket(bTokens), []byte(rec.Hash), &old)
		if err != nil {
			return err
		}
		prev := &old
		if !ok {
			prev = nil
		}
		if err := indexToken(tx, prev, &rec); err != nil {
			return err
		}
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
		var old store.Token
		ok, err := getJSON(bk, []byte(hash), &old)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		if err := unindexToken(tx, &old); err != nil {
			return err
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

// FindTokens returns the tokens matching every field f sets, oldest
// first, read through the scope or job index.
func (b *Store) FindTokens(ctx context.Context, f store.TokenFilter) ([]store.Token, error) {
	if f.Scope == "" && f.JobID == "" {
		return b.ListTokens(ctx)
	}
	var out []store.Token
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		idx, value := tx.Bucket(bIdxTokenScope), f.Scope
		if f.Scope == "" {
			idx, value = tx.Bucket(bIdxTokenJob), f.JobID
		}
		return scanIndex(idx, value, func(hash []byte) error {
			var t store.Token
			ok, err := getJSON(tx.Bucket(bTokens), hash, &t)
			if err != nil || !ok {
				return fmt.Errorf("a token of the index is not there: %w", errors.Join(err, store.ErrDamaged))
			}
			if (f.Scope == "" || t.Scope == f.Scope) && (f.JobID == "" || t.JobID == f.JobID) {
				out = append(out, t)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("finding tokens: %w", err)
	}
	slices.SortStableFunc(out, func(a, b store.Token) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// indexToken moves t's index entries from old's (nil: a new token).
func indexToken(tx *bbolt.Tx, old, t *store.Token) error {
	if old != nil {
		if err := unindexToken(tx, old); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bIdxTokenScope).Put(indexKey(t.Scope, t.Hash), nil); err != nil {
		return err
	}
	if t.JobID == "" {
		return nil
	}
	return tx.Bucket(bIdxTokenJob).Put(indexKey(t.JobID, t.Hash), nil)
}

func unindexToken(tx *bbolt.Tx, t *store.Token) error {
	if err := tx.Bucket(bIdxTokenScope).Delete(indexKey(t.Scope, t.Hash)); err != nil {
		return err
	}
	return tx.Bucket(bIdxTokenJob).Delete(indexKey(t.JobID, t.Hash))
}
