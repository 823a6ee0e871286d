package store

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// NewJobRecord is the record CreateJob stores for j: a copy with an ID
// generated when empty, State pending when empty, Created and Updated set
// to now (UTC). The backend sets Revision. Kind is required.
func NewJobRecord(j *Job, now time.Time) (Job, error) {
	c := *j
	if c.ID == "" {
		c.ID = NewJobID()
	}
	if c.Kind == "" {
		return Job{}, fmt.Errorf("job %s: kind is empty", c.ID)
	}
	if c.State == "" {
		c.State = JobPending
	}
	c.Created, c.Updated = now.UTC(), now.UTC()
	return c, nil
}

// UpdatedJobRecord is the record UpdateJob stores: fn applied to a copy of
// old, which must keep the ID, with old's Created and Revision (the backend
// sets the new one) and Updated set to now (UTC).
func UpdatedJobRecord(old *Job, fn func(*Job) error, now time.Time) (Job, error) {
	j := *old
	j.Machines = slices.Clone(old.Machines)
	j.Spec, j.Status = slices.Clone(old.Spec), slices.Clone(old.Status)
	if err := fn(&j); err != nil {
		return Job{}, err
	}
	if j.ID != old.ID {
		return Job{}, fmt.Errorf("changing the ID from %s to %s is not allowed", old.ID, j.ID)
	}
	j.Created, j.Updated, j.Revision = old.Created, now.UTC(), old.Revision
	return j, nil
}

// SortJobs puts jobs in ListJobs order: oldest Created first, then by ID.
func SortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// NewTokenRecord checks t before PutToken stores it (Hash must be the 64
// hex characters of a SHA-256) and stamps Created with now (UTC) when zero.
func NewTokenRecord(t Token, now time.Time) (Token, error) {
	if raw, err := hex.DecodeString(t.Hash); err != nil || len(raw) != 32 {
		// Not echoed: a mistaken caller may have passed the secret itself.
		return Token{}, fmt.Errorf("hash of %d characters: expected 64 hex characters of a SHA-256", len(t.Hash))
	}
	if t.Created.IsZero() {
		t.Created = now.UTC()
	}
	return t, nil
}
