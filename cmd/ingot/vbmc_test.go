package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// vbmcMockup returns testdata/redfish-mockups/NAME under the module root.
func vbmcMockup(t *testing.T, name string) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "redfish-mockups", name)
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = filepath.Dir(dir)
	}
}

func TestVBMCFlags(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		addrs []string
		pass  string
		err   string
	}{
		{name: "defaults", args: []string{"--mockup", "M"}, addrs: []string{"127.0.0.1:8000"}},
		{name: "count", args: []string{"--mockup", "M", "--count", "3", "--port-base", "9000"},
			addrs: []string{"127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"}},
		{name: "count from listen port", args: []string{"--mockup", "M", "--listen", "127.0.0.1:7000", "--count", "2"},
			addrs: []string{"127.0.0.1:7000", "127.0.0.1:7001"}},
		{name: "env", env: map[string]string{"INGOT_MOCKUP": "M", "INGOT_USER": "admin", "INGOT_PASSWORD_FILE": pw},
			addrs: []string{"127.0.0.1:8000"}, pass: "hunter2"},
		{name: "no mockup", err: "--mockup DIR is required"},
		{name: "user without password", args: []string{"--mockup", "M", "--user", "u"}, err: "--password-file"},
		{name: "bad listen", args: []string{"--mockup", "M", "--listen", "8000"}, err: "expected ADDR:PORT"},
		{name: "ports overflow", args: []string{"--mockup", "M", "--count", "10", "--port-base", "65530"}, err: "1..65535"},
		{name: "tls both", args: []string{"--mockup", "M", "--tls-self-signed", "--tls-cert", "c", "--tls-key", "k"}, err: "not both"},
		{name: "tls half", args: []string{"--mockup", "M", "--tls-cert", "c"}, err: "go together"},
		{name: "qemu fleet", args: []string{"--mockup", "M", "--count", "2", "--qemu-args", "-m 512"}, err: "--count 1"},
		{name: "stray arg", args: []string{"--mockup", "M", "extra"}, err: "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			e := &env{stdout: io.Discard, stderr: &stderr, getenv: func(k string) string { return tc.env[k] }}
			f, err := parseVBMCFlags(e, tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.addrs, f.addrs()); diff != "" {
				t.Errorf("addrs (-want +got):\n%s", diff)
			}
			if f.password != tc.pass {
				t.Errorf("password %q, want %q", f.password, tc.pass)
			}
		})
	}
}

// lockedBuffer is an io.Writer safe to read while a command writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `ingot vbmc` serves until its context ends, with auth from the password file.
func TestVBMCRun(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("pw1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"vbmc", "--mockup", vbmcMockup(t, "dmtf-public-tower"), "--listen", "127.0.0.1:0",
			"--user", "admin", "--password-file", pw}, &stdout, &stderr)
	}()
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/redfish/v1`)
	deadline := time.Now().Add(20 * time.Second)
	for re.FindString(stdout.String()) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no URL printed; stdout %q stderr %q", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	url := re.FindString(stdout.String())
	req, _ := http.NewRequest(http.MethodGet, url+"/Systems", nil)
	req.SetBasicAuth("admin", "pw1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET Systems: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ingot vbmc: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ingot vbmc did not stop with its context")
	}
}

// -h explains the command.
func TestVBMCHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"vbmc", "-h"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: ingot vbmc", "-fail503", "-tls-self-signed", "redfishtool"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stderr.String())
		}
	}
}
