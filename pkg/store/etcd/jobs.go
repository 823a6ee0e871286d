package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/store"
)

// A job's revision is the etcd mod revision of its record: it is set by
// every write, only grows, and is never handed out again (etcd's revision
// is the cluster's, so it is above every revision any job had). The
// record is stored with Revision 0 and given its mod revision when read.

// CreateJob stores a new job (see store.JobStore) in a transaction that
// compares the ID's absence; j gets the record and its revision.
func (s *Store) CreateJob(ctx context.Context, j *store.Job) error {
	c, err := store.NewJobRecord(j, s.opts.Now())
	if err != nil {
		return fmt.Errorf("creating job: %w", err)
	}
	c.Revision = 0
	raw, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("creating job %s: %w", c.ID, err)
	}
	rev, err := s.update(ctx, func(t *tx) error {
		k := s.k.job(c.ID)
		got, err := t.get(k)
		if err != nil {
			return err
		}
		if _, ok := got[k]; ok {
			return store.ErrExists
		}
		t.put(k, raw)
		t.put(s.k.jobState(string(c.State), c.ID), nil)
		return nil
	})
	if err != nil {
		return fmt.Errorf("creating job %s: %w", c.ID, err)
	}
	c.Revision = uint64(rev)
	*j = c
	return nil
}

// job reads and decodes job id with its revision; store.ErrNotFound.
func (t *tx) job(id string) (*store.Job, error) {
	k := t.s.k.job(id)
	got, err := t.get(k)
	if err != nil {
		return nil, err
	}
	raw, ok := got[k]
	if !ok {
		return nil, store.ErrNotFound
	}
	return decodeJob(raw, t.modRev(k))
}

func decodeJob(raw []byte, rev int64) (*store.Job, error) {
	var j store.Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("decoding job: %w", err)
	}
	j.Revision = uint64(rev)
	return &j, nil
}

// GetJob returns the job with this ID.
func (s *Store) GetJob(ctx context.Context, id string) (*store.Job, error) {
	var j *store.Job
	err := s.view(ctx, func(t *tx) error {
		var err error
		j, err = t.job(id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading job %s: %w", id, err)
	}
	return j, nil
}

// ListJobs returns jobs in the given state ("" = all) in SortJobs order.
// A state is read through its index (js/<state>/): the running jobs are
// found without reading the ended ones.
func (s *Store) ListJobs(ctx context.Context, state store.JobState) ([]store.Job, error) {
	var out []store.Job
	err := s.view(ctx, func(t *tx) error {
		out = []store.Job{}
		if state == "" {
			return t.scanPrefix(s.k.jobs(), false, func(kv *mvccpb.KeyValue) error {
				j, err := decodeJob(kv.Value, kv.ModRevision)
				if err != nil {
					return fmt.Errorf("%s: %w", kv.Key, err)
				}
				out = append(out, *j)
				return nil
			})
		}
		return t.indexed(s.k.jobStates(string(state)), s.k.job, func(kv *mvccpb.KeyValue) error {
			j, err := decodeJob(kv.Value, kv.ModRevision)
			if err != nil {
				return fmt.Errorf("%s: %w", kv.Key, err)
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

// indexed reads the index entries under prefix (keys prefix<id>), then
// the records record(id) names, a page at a time, and calls fn with each.
// An entry whose record is missing is damage: both are written in one
// transaction.
func (t *tx) indexed(prefix string, record func(id string) string, fn func(kv *mvccpb.KeyValue) error) error {
	var ids []string
	err := t.scanPrefix(prefix, true, func(kv *mvccpb.KeyValue) error {
		ids = append(ids, strings.TrimPrefix(string(kv.Key), prefix))
		return nil
	})
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(ids, scanPage) {
		keys := make([]string, len(chunk))
		for i, id := range chunk {
			keys[i] = record(id)
		}
		kvs, err := t.fetch(keys)
		if err != nil {
			return err
		}
		for i, kv := range kvs {
			if kv == nil {
				return fmt.Errorf("index entry %s%s: the record is missing: %w", prefix, chunk[i], store.ErrDamaged)
			}
			if err := fn(kv); err != nil {
				return err
			}
		}
	}
	return nil
}

// UpdateJob runs fn on a copy of the job and stores the result in a
// transaction that compares the job's revision (fn runs again on a fresh
// copy if another writer got in between).
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(*store.Job) error) (*store.Job, error) {
	return s.updateJob(ctx, id, nil, fn)
}

// UpdateJobRev is UpdateJob if the job is still at revision rev;
// store.ErrStale, fn not run and nothing written, if it is not.
func (s *Store) UpdateJobRev(ctx context.Context, id string, rev uint64, fn func(*store.Job) error) (*store.Job, error) {
	return s.updateJob(ctx, id, &rev, fn)
}

func (s *Store) updateJob(ctx context.Context, id string, want *uint64, fn func(*store.Job) error) (*store.Job, error) {
	var out store.Job
	rev, err := s.updateLinearizable(ctx, func(t *tx) error {
		old, err := t.job(id)
		if err != nil {
			return err
		}
		if want != nil {
			if err := store.CheckRevision("job "+id, old.Revision, *want); err != nil {
				return err
			}
		}
		j, err := store.UpdatedJobRecord(old, fn, s.opts.Now())
		if err != nil {
			return err
		}
		j.Revision = 0
		raw, err := json.Marshal(&j)
		if err != nil {
			return err
		}
		t.put(s.k.job(id), raw)
		if j.State != old.State {
			t.del(s.k.jobState(string(old.State), id))
			t.put(s.k.jobState(string(j.State), id), nil)
		}
		out = j
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("updating job %s: %w", id, err)
	}
	out.Revision = uint64(rev)
	return &out, nil
}

// PutToken stores t under its hash, replacing a token with the same hash
// (that is how revocation is written), its scope and job index entries
// moved in the same transaction.
func (s *Store) PutToken(ctx context.Context, tk store.Token) error {
	rec, err := store.NewTokenRecord(tk, s.opts.Now())
	if err != nil {
		return fmt.Errorf("storing token %s: %w", tk.Name, err)
	}
	raw, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("storing token %s: %w", tk.Name, err)
	}
	_, err = s.update(ctx, func(t *tx) error {
		old, err := t.token(rec.Hash)
		if err != nil {
			return err
		}
		if old != nil {
			t.unindexToken(old)
		}
		t.put(s.k.token(rec.Hash), raw)
		t.put(s.k.tokenScopes(rec.Scope)+rec.Hash, nil)
		if rec.JobID != "" {
			t.put(s.k.tokenJobs(rec.JobID)+rec.Hash, nil)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing token %s: %w", tk.Name, err)
	}
	return nil
}

// token reads the token stored under hash (nil when none).
func (t *tx) token(hash string) (*store.Token, error) {
	k := t.s.k.token(hash)
	got, err := t.get(k)
	if err != nil {
		return nil, err
	}
	raw, ok := got[k]
	if !ok {
		return nil, nil
	}
	var tk store.Token
	if err := json.Unmarshal(raw, &tk); err != nil {
		return nil, fmt.Errorf("decoding token: %w", err) // never echo the hash
	}
	return &tk, nil
}

// unindexToken deletes tk's index entries.
func (t *tx) unindexToken(tk *store.Token) {
	t.del(t.s.k.tokenScopes(tk.Scope) + tk.Hash)
	if tk.JobID != "" {
		t.del(t.s.k.tokenJobs(tk.JobID) + tk.Hash)
	}
}

// TokenByHash returns the token stored under hash.
func (s *Store) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	var tk *store.Token
	err := s.view(ctx, func(t *tx) error {
		var err error
		if tk, err = t.token(hash); err == nil && tk == nil {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading token: %w", err) // never echo the hash
	}
	return tk, nil
}

// DeleteToken removes the token stored under hash and its index entries.
func (s *Store) DeleteToken(ctx context.Context, hash string) error {
	_, err := s.update(ctx, func(t *tx) error {
		tk, err := t.token(hash)
		if err != nil {
			return err
		}
		if tk == nil {
			return store.ErrNotFound
		}
		t.unindexToken(tk)
		t.del(s.k.token(hash))
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting token: %w", err) // never echo the hash
	}
	return nil
}

// ListTokens returns every token, oldest Created first.
func (s *Store) ListTokens(ctx context.Context) ([]store.Token, error) {
	var out []store.Token
	err := s.view(ctx, func(t *tx) error {
		out = []store.Token{}
		return t.scanPrefix(s.k.tokens(), false, collectToken(&out, store.TokenFilter{}))
	})
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	slices.SortStableFunc(out, func(a, b store.Token) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// FindTokens returns the tokens matching every field f sets, oldest
// Created first, read through the scope index (or the job index when f
// names no scope): a machine's credentials are found without reading
// every token.
func (s *Store) FindTokens(ctx context.Context, f store.TokenFilter) ([]store.Token, error) {
	if f.Scope == "" && f.JobID == "" {
		return s.ListTokens(ctx)
	}
	var out []store.Token
	err := s.view(ctx, func(t *tx) error {
		out = []store.Token{}
		prefix := s.k.tokenScopes(f.Scope)
		if f.Scope == "" {
			prefix = s.k.tokenJobs(f.JobID)
		}
		return t.indexed(prefix, s.k.token, collectToken(&out, f))
	})
	if err != nil {
		return nil, fmt.Errorf("finding tokens: %w", err)
	}
	slices.SortStableFunc(out, func(a, b store.Token) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// collectToken decodes a token record and appends it to out if it matches
// every field f sets (an index prefix also holds longer scopes).
func collectToken(out *[]store.Token, f store.TokenFilter) func(kv *mvccpb.KeyValue) error {
	return func(kv *mvccpb.KeyValue) error {
		var tk store.Token
		if err := json.Unmarshal(kv.Value, &tk); err != nil {
			return fmt.Errorf("decoding token: %w", err) // never echo the hash
		}
		if (f.Scope == "" || tk.Scope == f.Scope) && (f.JobID == "" || tk.JobID == f.JobID) {
			*out = append(*out, tk)
		}
		return nil
	}
}
