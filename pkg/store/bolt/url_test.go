package bolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

func TestOpenURL(t *testing.T) {
	tests := map[string]struct {
		location func(dir string) string // dir: a fresh temporary directory
		wantFile string                  // relative to dir; "" = Open must fail
		wantErr  []string                // all in the error
	}{
		"bolt URL":              {location: func(d string) string { return "bolt://" + d + "/ingot.db" }, wantFile: "ingot.db"},
		"bolt URL on localhost": {location: func(d string) string { return "bolt://localhost" + d + "/a.db" }, wantFile: "a.db"},
		"bolt URL escapes":      {location: func(d string) string { return "bolt://" + d + "/my%20ingot.db" }, wantFile: "my ingot.db"},
		"absolute path":         {location: func(d string) string { return d + "/sub/ingot.db" }, wantFile: "sub/ingot.db"},
		"relative path":         {location: func(string) string { return "rel/ingot.db" }, wantFile: "rel/ingot.db"},
		"path with a colon":     {location: func(string) string { return "data:v2.db" }, wantFile: "data:v2.db"},
		"etcd": {location: func(string) string { return "etcd://10.0.0.1:2379/ingot" },
			wantErr: []string{`scheme "etcd" is not supported`, "bolt:///var/lib/ingot/ingot.db or a plain path"}},
		"file scheme": {location: func(d string) string { return "file://" + d + "/x.db" },
			wantErr: []string{`scheme "file" is not supported`}},
		"bolt URL with a host": {location: func(string) string { return "bolt://var/lib/ingot.db" },
			wantErr: []string{`names host "var"`, "three slashes"}},
		"bolt URL without a file": {location: func(string) string { return "bolt:///" },
			wantErr: []string{"names no file"}},
		"bolt URL with a query": {location: func(d string) string { return "bolt://" + d + "/x.db?timeout=1s" },
			wantErr: []string{"query"}},
		"empty": {location: func(string) string { return "" }, wantErr: []string{"no location"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir) // relative paths land in dir
			loc := tc.location(dir)
			s, err := store.NewRegistry("bolt", bolt.Backend()).Open(context.Background(), loc, store.Options{Timeout: time.Second})
			if tc.wantFile == "" {
				if err == nil {
					s.Close()
					t.Fatalf("OpenURL(%q) succeeded; want an error", loc)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("OpenURL(%q) = %q; want it to contain %q", loc, err, want)
					}
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("a refused location created %v", entries)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenURL(%q): %v", loc, err)
			}
			if err := s.CreateMachine(context.Background(), &machine.Machine{Name: "gpu-01"}); err != nil {
				t.Error(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tc.wantFile)
			if err := bolt.CheckFile(path); err != nil {
				t.Errorf("no sound database at %s: %v", path, err)
			}
		})
	}
}

func TestOpenURLCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "ingot.db")
	if _, err := store.NewRegistry("bolt", bolt.Backend()).Open(ctx, path, store.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenURL with a done context: %v; want context.Canceled", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled OpenURL created %s", path)
	}
}
