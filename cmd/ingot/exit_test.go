package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Refusals no restart fixes exit 78 (ingot.service's
// RestartPreventExitStatus); other failures 1, usage 2, and a command's
// own status as it asked.
func TestExitCode(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		code int
		say  bool
	}{
		"success":            {nil, 0, false},
		"failure":            {errors.New("boom"), 1, true},
		"usage":              {fmt.Errorf("x: %w", errUsage), 2, false},
		"a command's status": {exitError(3), 3, false},
		"missing privileges": {fmt.Errorf("serve: %w", needsError{errors.New("DHCP on eth1 needs CAP_NET_BIND_SERVICE")}), exitConfig, true},
		"newer schema":       {fmt.Errorf("opening store: %w", store.ErrSchemaNewer), exitConfig, true},
		"other schema error": {fmt.Errorf("migrating: %w", store.ErrSchema), 1, true},
	} {
		if code, say := exitCode(c.err); code != c.code || say != c.say {
			t.Errorf("%s: exitCode(%v) = %d, %v; want %d, %v", name, c.err, code, say, c.code, c.say)
		}
	}
}

// The ingot process itself, on a store a newer ingot wrote: exit 78 and a
// message naming both versions.
func TestExitNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ingot.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bbolt.Tx) error {
		meta, _ := tx.CreateBucket([]byte("meta"))
		return meta.Put([]byte("schema"), binary.BigEndian.AppendUint64(nil, 99))
	})
	db.Close()
	cmd := exec.Command(os.Args[0], "admin", "machine", "ls", "--db", path)
	cmd.Env = append(os.Environ(), "INGOT_TEST_AS_INGOT=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitConfig || !strings.Contains(string(out), "schema version 99 is newer than this ingot understands") {
		t.Errorf("ingot admin on a newer store: %v\n%s\nwant exit status %d and the versions", err, out, exitConfig)
	}
}
