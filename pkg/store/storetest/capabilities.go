package storetest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// capabilityCases check SecretStore, TelemetryStore and Maintainer.
var capabilityCases = []conformanceCase{
	{"secrets/put, get, list, replace and delete", secrets},
	{"secrets/bindings kept through put and replace", secretBindings},
	{"telemetry/states, power days and summaries", telemetry},
	{"maintainer/backup, check, location and stats", maintainer},
}

func secrets(t *testing.T, e env) {
	put := func(s store.Secret) {
		t.Helper()
		if err := e.s.PutSecret(e.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	put(store.Secret{Name: "b", KeyID: "k1", Sealed: []byte("sealed-b")})
	put(store.Secret{Name: "a", KeyID: "k1", Sealed: []byte("sealed-a")})
	if err := e.s.PutSecret(e.ctx, store.Secret{Name: "c"}); err == nil {
		t.Error("a secret without a sealed value was stored")
	}
	got, err := e.s.GetSecret(e.ctx, "a")
	if err != nil || string(got.Sealed) != "sealed-a" || got.Created.IsZero() {
		t.Fatalf("GetSecret: %+v, %v", got, err)
	}
	_, err = e.s.GetSecret(e.ctx, "zz")
	wantIs(t, "GetSecret of an unknown name", err, store.ErrNotFound)
	list, _ := e.s.ListSecrets(e.ctx)
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("ListSecrets: %+v; want a, b", list)
	}
	// ReplaceSecrets: all or nothing, refused when one changed since read.
	for i := range list {
		list[i].KeyID, list[i].Sealed = "k2", []byte("resealed-"+list[i].Name)
	}
	e.clk.Advance(1)
	put(store.Secret{Name: "b", KeyID: "k1", Sealed: []byte("changed")})
	err = e.s.ReplaceSecrets(e.ctx, list)
	wantIs(t, "ReplaceSecrets after a change", err, store.ErrStale)
	if err != nil && strings.Contains(err.Error(), "resealed") {
		t.Errorf("ReplaceSecrets' error shows sealed bytes: %v", err)
	}
	if a, _ := e.s.GetSecret(e.ctx, "a"); a == nil || a.KeyID != "k1" {
		t.Errorf("a stale ReplaceSecrets wrote secret a: %+v", a)
	}
	fresh, _ := e.s.ListSecrets(e.ctx)
	for i := range fresh {
		fresh[i].KeyID = "k2"
	}
	if err := e.s.ReplaceSecrets(e.ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if b, _ := e.s.GetSecret(e.ctx, "b"); b == nil || b.KeyID != "k2" {
		t.Errorf("ReplaceSecrets did not write b: %+v", b)
	}
	if err := e.s.DeleteSecret(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	wantIs(t, "a second DeleteSecret", e.s.DeleteSecret(e.ctx, "a"), store.ErrNotFound)
}

// secretBindings: a secret's endpoints are stored with it and kept by
// ReplaceSecrets (key rotation re-seals a bound secret without unbinding
// it), and BoundTo finds them.
func secretBindings(t *testing.T, e env) {
	at := e.clk.Now()
	bound := []store.SecretBinding{{Endpoint: "https://10.0.0.5", By: "operator:alice", At: at},
		{Endpoint: "https://10.0.0.6:8443", By: "first use by node-2", At: at}}
	if err := e.s.PutSecret(e.ctx, store.Secret{Name: "n1", KeyID: "k1", Sealed: []byte("x"), Endpoints: bound}); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.GetSecret(e.ctx, "n1")
	if err != nil || len(got.Endpoints) != 2 || got.Endpoints[1] != bound[1] || !got.Endpoints[0].At.Equal(at) {
		t.Fatalf("GetSecret: %+v, %v; want the endpoints %+v", got, err, bound)
	}
	if !got.BoundTo("https://10.0.0.6:8443") || got.BoundTo("https://10.0.0.7") || got.BoundTo("http://10.0.0.5") {
		t.Errorf("BoundTo on %+v", got.Endpoints)
	}
	e.clk.Advance(1)
	got.KeyID, got.Sealed = "k2", []byte("y")
	if err := e.s.ReplaceSecrets(e.ctx, []store.Secret{*got}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.GetSecret(e.ctx, "n1"); got == nil || got.KeyID != "k2" || len(got.Endpoints) != 2 {
		t.Errorf("after ReplaceSecrets: %+v, want key k2 and both endpoints", got)
	}
	list, _ := e.s.ListSecrets(e.ctx)
	if len(list) != 1 || len(list[0].Endpoints) != 2 {
		t.Errorf("ListSecrets: %+v, want the endpoints", list)
	}
	// Binding one more is a ReplaceSecrets of the record read: refused
	// when the secret changed since (two first uses racing).
	stale := list[0]
	e.clk.Advance(1)
	list[0].Endpoints = append(list[0].Endpoints, store.SecretBinding{Endpoint: "https://10.0.0.7", By: "operator:bob", At: at})
	if err := e.s.ReplaceSecrets(e.ctx, list); err != nil {
		t.Fatal(err)
	}
	stale.Endpoints = append(stale.Endpoints, store.SecretBinding{Endpoint: "https://evil", By: "first use by x", At: at})
	wantIs(t, "a binding written over a newer one", e.s.ReplaceSecrets(e.ctx, []store.Secret{stale}), store.ErrStale)
	if got, _ := e.s.GetSecret(e.ctx, "n1"); got == nil || len(got.Endpoints) != 3 || got.BoundTo("https://evil") {
		t.Errorf("after a stale binding: %+v", got)
	}
}

func telemetry(t *testing.T, e env) {
	days := []store.PowerDay{{Machine: "m-1", Day: "2026-11-30", Buckets: []byte("a")}, {Machine: "m-1", Day: "2026-12-01", Buckets: []byte("b")},
		{Machine: "m-10", Day: "2026-12-01", Buckets: []byte("c")}}
	if err := e.s.PutTelemetry(e.ctx, []store.NodeTelemetry{{Machine: "m-1", State: []byte("{}")}, {Machine: "m-10", State: []byte("{}")}}, days); err != nil {
		t.Fatal(err)
	}
	if err := e.s.PutTelemetry(e.ctx, nil, []store.PowerDay{{Machine: "m-1", Day: "bad"}}); err == nil {
		t.Error("a day that is not a date was stored")
	}
	ns, _ := e.s.ListNodeTelemetry(e.ctx)
	if len(ns) != 2 || ns[0].Machine != "m-1" {
		t.Fatalf("nodes: %+v", ns)
	}
	got, _ := e.s.PowerDays(e.ctx, "m-1", "2026-12-01")
	if len(got) != 1 || string(got[0].Buckets) != "b" {
		t.Errorf("m-1 from 12-01: %+v (m-10's days must not show)", got)
	}
	if n, err := e.s.DeletePowerDaysBefore(e.ctx, "2026-12-01"); n != 1 || err != nil {
		t.Errorf("DeletePowerDaysBefore: %d, %v; want 1", n, err)
	}
	sums := []store.PowerDay{{Machine: "m-1", Day: "2025-12-01", Buckets: []byte("old")}, {Machine: "m-1", Day: "2026-12-01", Buckets: []byte("s")},
		{Machine: "m-10", Day: "2026-12-01", Buckets: []byte("t")}}
	if err := e.s.PutPowerSummaries(e.ctx, sums); err != nil {
		t.Fatal(err)
	}
	if err := e.s.PutPowerSummaries(e.ctx, []store.PowerDay{{Machine: "m/1", Day: "2026-12-01"}}); err == nil {
		t.Error("a summary of a machine ID with a slash was stored")
	}
	if got, _ := e.s.PowerSummaries(e.ctx, "m-1", ""); len(got) != 2 || string(got[1].Buckets) != "s" {
		t.Errorf("m-1's summaries: %+v", got)
	}
	if got, _ := e.s.PowerDays(e.ctx, "m-1", "2026-12-01"); len(got) != 1 || string(got[0].Buckets) != "b" {
		t.Errorf("m-1's days after summaries were put: %+v (kept apart)", got)
	}
	if n, err := e.s.DeletePowerSummariesBefore(e.ctx, "2025-12-02"); n != 1 || err != nil {
		t.Errorf("DeletePowerSummariesBefore: %d, %v; want 1", n, err)
	}
	if err := e.s.DeleteTelemetry(e.ctx, "m-1"); err != nil {
		t.Fatal(err)
	}
	for what, n := range map[string]int{"m-1's days": 0, "m-10's days": 1, "m-1's summaries": 0, "m-10's summaries": 1} {
		id, kind, _ := strings.Cut(what, "'s ")
		read := e.s.PowerDays
		if kind == "summaries" {
			read = e.s.PowerSummaries
		}
		if got, _ := read(e.ctx, id, ""); len(got) != n {
			t.Errorf("%s after DeleteTelemetry(m-1): %+v; want %d", what, got, n)
		}
	}
}

func maintainer(t *testing.T, e env) {
	e.create(t, machine.Machine{Name: "gpu-01"})
	var b bytes.Buffer
	n, err := e.s.Backup(e.ctx, &b)
	if err != nil || n == 0 || int64(b.Len()) != n {
		t.Errorf("Backup = %d, %v (%d bytes written); want the copy's size", n, err, b.Len())
	}
	if err := e.s.Check(e.ctx); err != nil {
		t.Errorf("Check of a sound store: %v", err)
	}
	loc := e.s.Location()
	if loc == "" || !strings.Contains(loc, "://") || strings.Contains(loc, "password") {
		t.Errorf("Location = %q; want a URL without credentials", loc)
	}
	names := func() []string {
		var out []string
		seen := map[string]bool{}
		for _, s := range e.s.Stats() {
			if s.Name == "" || seen[s.Name] || s.Help == "" {
				t.Errorf("stat %+v: want a unique name and a help text", s)
			}
			seen[s.Name] = true
			out = append(out, s.Name)
		}
		return out
	}
	if a, b := names(), names(); strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("Stats names changed between calls: %v, then %v", a, b)
	}
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Backup(e.ctx, &b); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Backup after Close: %v; want ErrClosed", err)
	}
}
