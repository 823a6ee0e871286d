package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseRefusals(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	full := map[string]string{"SOURCE_DATE_EPOCH": "1700000000", "GOMODCACHE": "/m", "GOROOT": "/g"}
	args := []string{"--bin", "b", "--describe", "v1.0", "--commit", "abc"}
	if o, err := parse(args, env(full)); err != nil || o.epoch.Unix() != 1700000000 || o.arch != "amd64" {
		t.Fatalf("parse: %+v, %v", o, err)
	}
	for name, tc := range map[string]struct {
		args []string
		vars map[string]string
		want string
	}{
		"no SOURCE_DATE_EPOCH": {args, map[string]string{"GOMODCACHE": "/m", "GOROOT": "/g"}, "SOURCE_DATE_EPOCH"},
		"no commit":            {args[:4], full, "required"},
		"no module cache":      {args, map[string]string{"SOURCE_DATE_EPOCH": "1"}, "required"},
		"riscv64":              {append(args, "--arch", "riscv64"), full, "expected amd64 or arm64"},
	} {
		if _, err := parse(tc.args, env(tc.vars)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	if err := run(args, env(full), io.Discard); err == nil || !strings.Contains(err.Error(), "b/ingot") {
		t.Errorf("run without binaries: %v, want an error naming b/ingot", err)
	}
}
