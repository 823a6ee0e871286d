package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/store"
)

// jobCases check JobStore and TokenStore.
var jobCases = []conformanceCase{
	{"jobs/create fills defaults, get, duplicate ID", jobCreateGet},
	{"jobs/list by state, oldest first", jobList},
	{"jobs/update stores fn's result, or nothing", jobUpdate},
	{"tokens/by hash, list, replace, delete", tokenCRUD},
}

func jobCreateGet(t *testing.T, e env) {
	j := store.Job{Kind: "reimage", Machines: []string{"m-1"}, Spec: json.RawMessage(`{"image":"a"}`), Revision: 99}
	if err := e.s.CreateJob(e.ctx, &j); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(j.ID, "j-") || len(j.ID) != len("j-")+10 || j.State != store.JobPending ||
		!j.Created.Equal(start) || !j.Updated.Equal(start) || j.Revision == 0 || j.Revision == 99 {
		t.Errorf("created %+v; want a j- ID, state pending, times from the clock, a revision of the store's", j)
	}
	got, err := e.s.GetJob(e.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(j, *got); diff != "" {
		t.Errorf("GetJob (-created +got):\n%s", diff)
	}
	_, err = e.s.GetJob(e.ctx, "j-nope")
	wantIs(t, "GetJob of an unknown ID", err, store.ErrNotFound)
	wantIs(t, "CreateJob with a taken ID", e.s.CreateJob(e.ctx, &store.Job{ID: j.ID, Kind: "inspect"}), store.ErrExists)
	wantMsg(t, "CreateJob without a kind", e.s.CreateJob(e.ctx, &store.Job{}), "kind is empty")
	if got, _ := e.s.GetJob(e.ctx, j.ID); got == nil || got.Kind != "reimage" {
		t.Errorf("a refused create changed the job: %+v", got)
	}
}

func jobList(t *testing.T, e env) {
	for _, j := range []store.Job{
		{ID: "j-b", Kind: "reimage", State: store.JobRunning},
		{ID: "j-a", Kind: "reimage", State: store.JobRunning}, // same Created as j-b: by ID
		{ID: "j-0", Kind: "inspect", State: store.JobSucceeded},
		{ID: "j-z", Kind: "rollout"},
	} {
		if j.ID != "j-a" {
			e.clk.Advance(time.Second)
		}
		if err := e.s.CreateJob(e.ctx, &j); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[store.JobState][]string{
		"":                 {"j-a", "j-b", "j-0", "j-z"},
		store.JobRunning:   {"j-a", "j-b"},
		store.JobPending:   {"j-z"},
		store.JobSucceeded: {"j-0"},
		store.JobFailed:    {},
	}
	for state, want := range tests {
		t.Run("state "+string(state), func(t *testing.T) {
			js, err := e.s.ListJobs(e.ctx, state)
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, j := range js {
				ids = append(ids, j.ID)
			}
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("ListJobs(%q) (-want +got):\n%s", state, diff)
			}
		})
	}
}

func jobUpdate(t *testing.T, e env) {
	j := store.Job{Kind: "reimage"}
	if err := e.s.CreateJob(e.ctx, &j); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	got, err := e.s.UpdateJob(e.ctx, j.ID, func(j *store.Job) error {
		j.State, j.Step, j.Attempt = store.JobRunning, "power", 1
		j.Created = time.Time{}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.JobRunning || got.Step != "power" || !got.Created.Equal(start) ||
		!got.Updated.Equal(start.Add(time.Minute)) || got.Revision <= j.Revision {
		t.Errorf("updated %+v; want fn's edits, Created kept, Updated from the clock, a higher revision than %d", got, j.Revision)
	}
	if stored, err := e.s.GetJob(e.ctx, j.ID); err != nil || stored.Step != "power" || stored.Revision != got.Revision {
		t.Errorf("stored %+v, %v; want what UpdateJob returned", stored, err)
	}
	boom := errors.New("refused by fn")
	tests := map[string]struct {
		fn   func(*store.Job) error
		want error
	}{
		"fn fails":      {func(j *store.Job) error { j.State = store.JobFailed; return boom }, boom},
		"fn changes ID": {func(j *store.Job) error { j.ID = "j-other"; return nil }, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := e.s.UpdateJob(e.ctx, j.ID, tc.fn)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("UpdateJob: %v; want %v", err, tc.want)
			}
			if stored, _ := e.s.GetJob(e.ctx, j.ID); stored == nil || stored.State != store.JobRunning || stored.Revision != got.Revision {
				t.Errorf("aborted update stored %+v", stored)
			}
		})
	}
	_, err = e.s.UpdateJob(e.ctx, "j-nope", func(*store.Job) error { return nil })
	wantIs(t, "UpdateJob of an unknown ID", err, store.ErrNotFound)
}

func tokenCRUD(t *testing.T, e env) {
	hash := func(secret string) string { h := sha256.Sum256([]byte(secret)); return hex.EncodeToString(h[:]) }
	older := store.Token{ID: "t-1", Name: "ci", Hash: hash("one"), Scope: "operator", Created: start.Add(-time.Hour)}
	newer := store.Token{ID: "t-2", Name: "agent", Hash: hash("two"), Scope: "machine:m-1", Kind: "agent"} // Created by the store
	for _, tk := range []store.Token{newer, older} {
		if err := e.s.PutToken(e.ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.s.TokenByHash(e.ctx, newer.Hash)
	if err != nil || got.ID != "t-2" || got.Kind != "agent" || !got.Created.Equal(start) {
		t.Errorf("TokenByHash = %+v, %v; want t-2 with Created from the store's clock", got, err)
	}
	list, err := e.s.ListTokens(e.ctx)
	if err != nil || len(list) != 2 || list[0].ID != "t-1" || list[1].ID != "t-2" {
		t.Errorf("ListTokens = %+v, %v; want t-1 then t-2 (oldest first)", list, err)
	}
	third := store.Token{ID: "t-3", Name: "boot", Hash: hash("three"), Scope: "machine:m-1", Kind: "boot", JobID: "j-1"}
	if err := e.s.PutToken(e.ctx, third); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		f    store.TokenFilter
		want []string
	}{
		"by scope":         {store.TokenFilter{Scope: "machine:m-1"}, []string{"t-2", "t-3"}},
		"by job":           {store.TokenFilter{JobID: "j-1"}, []string{"t-3"}},
		"by scope and job": {store.TokenFilter{Scope: "machine:m-1", JobID: "j-1"}, []string{"t-3"}},
		"operator":         {store.TokenFilter{Scope: "operator"}, []string{"t-1"}},
		"none":             {store.TokenFilter{Scope: "machine:m-9"}, nil},
	} {
		got, err := e.s.FindTokens(e.ctx, tc.f)
		var ids []string
		for _, tk := range got {
			ids = append(ids, tk.ID)
		}
		if err != nil || fmt.Sprint(ids) != fmt.Sprint(tc.want) {
			t.Errorf("FindTokens %s = %v, %v; want %v", name, ids, err, tc.want)
		}
	}
	moved := third
	moved.JobID = "j-2" // the same hash written again moves it
	if err := e.s.PutToken(e.ctx, moved); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.FindTokens(e.ctx, store.TokenFilter{JobID: "j-1"}); len(got) != 0 {
		t.Errorf("FindTokens by the old job after a rewrite = %+v; want none", got)
	}
	if err := e.s.DeleteToken(e.ctx, third.Hash); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.FindTokens(e.ctx, store.TokenFilter{Scope: "machine:m-1"}); len(got) != 1 {
		t.Errorf("FindTokens after a delete = %+v; want t-2 only", got)
	}
	older.Revoked = true // revocation: the same hash written again
	if err := e.s.PutToken(e.ctx, older); err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.TokenByHash(e.ctx, older.Hash); err != nil || !got.Revoked {
		t.Errorf("replaced token = %+v, %v; want it revoked", got, err)
	}
	if list, _ := e.s.ListTokens(e.ctx); len(list) != 2 {
		t.Errorf("replacing a token left %d tokens; want 2 (t-1, t-2)", len(list))
	}
	if err := e.s.DeleteToken(e.ctx, older.Hash); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.TokenByHash(e.ctx, older.Hash)
	wantIs(t, "TokenByHash after delete", err, store.ErrNotFound)
	err = e.s.DeleteToken(e.ctx, older.Hash)
	wantIs(t, "DeleteToken again", err, store.ErrNotFound)
	if err != nil && strings.Contains(err.Error(), older.Hash) {
		t.Errorf("an error echoes the hash: %v", err)
	}
	err = e.s.PutToken(e.ctx, store.Token{Name: "bad", Hash: "the-secret-itself"})
	if err == nil || strings.Contains(err.Error(), "the-secret-itself") {
		t.Errorf("PutToken with a malformed hash: %v; want an error that does not echo it", err)
	}
}
