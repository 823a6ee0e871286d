package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

func TestSecrets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ingot.db")
	s, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutSecret(ctx, store.Secret{Name: "b", KeyID: "k1", Sealed: []byte("sealed-b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSecret(ctx, store.Secret{Name: "a", KeyID: "k1", Sealed: []byte("sealed-a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSecret(ctx, store.Secret{Name: "c"}); err == nil {
		t.Error("a secret without a sealed value was stored")
	}
	got, err := s.GetSecret(ctx, "a")
	if err != nil || string(got.Sealed) != "sealed-a" || got.Created.IsZero() {
		t.Fatalf("GetSecret: %+v, %v", got, err)
	}
	if _, err := s.GetSecret(ctx, "zz"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSecret of an unknown name: %v", err)
	}
	list, _ := s.ListSecrets(ctx)
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("ListSecrets: %+v", list)
	}
	// ReplaceSecrets: all or nothing, refused when one changed since read.
	for i := range list {
		list[i].KeyID, list[i].Sealed = "k2", []byte("resealed-"+list[i].Name)
	}
	stale := append([]store.Secret(nil), list...)
	if err := s.PutSecret(ctx, store.Secret{Name: "b", KeyID: "k1", Sealed: []byte("changed")}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceSecrets(ctx, stale); !errors.Is(err, store.ErrStale) || strings.Contains(err.Error(), "resealed") {
		t.Errorf("ReplaceSecrets after a change: %v, want ErrStale without the sealed bytes", err)
	}
	if a, _ := s.GetSecret(ctx, "a"); a.KeyID != "k1" {
		t.Errorf("a stale ReplaceSecrets wrote secret a: %+v", a)
	}
	fresh, _ := s.ListSecrets(ctx)
	for i := range fresh {
		fresh[i].KeyID = "k2"
	}
	if err := s.ReplaceSecrets(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.GetSecret(ctx, "b"); b.KeyID != "k2" {
		t.Errorf("ReplaceSecrets did not write b: %+v", b)
	}
	if err := s.DeleteSecret(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSecret(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}
