package vbmc

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// mockupDir returns testdata/redfish-mockups under the module root.
func mockupDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	d := filepath.Join(dir, "testdata", "redfish-mockups")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("mockups: %v (expected testdata/redfish-mockups in the repository)", err)
	}
	return d
}

// mockups names every mockup folder.
var mockups = []string{
	"dmtf-public-rackmount1",
	"dmtf-public-tower",
	"gigabyte-ami-h262-z63",
	"hpe-cray-ex235n-a100",
	"hpe-ilo5-xl675d-a40",
	"supermicro-hgx-b200-partial",
}

const (
	testUser = "admin"
	testPass = "s3cret"
)

// start serves a BMC for mockup on a loopback httptest server.
func start(t testing.TB, mockup string, mod func(*Config)) (*BMC, *client) {
	t.Helper()
	cfg := Config{Root: filepath.Join(mockupDir(t), mockup), Username: testUser, Password: testPass, Seed: 1}
	if mod != nil {
		mod(&cfg)
	}
	b, err := newBMC(cfg, loadCached(t, cfg.Root))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, &client{t: t, base: srv.URL, user: testUser, pass: testPass, hc: srv.Client()}
}

// trees caches loaded mockups across tests (a tree is read-only and shared,
// as in a Fleet), which keeps the race-detector run short.
var trees sync.Map

func loadCached(t testing.TB, root string) *tree {
	t.Helper()
	if tr, ok := trees.Load(root); ok {
		return tr.(*tree)
	}
	tr, err := loadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	trees.Store(root, tr)
	return tr
}

// client is a tiny Redfish client for tests: basic auth unless token is set.
type client struct {
	t          testing.TB
	base       string
	user, pass string
	token      string
	hc         *http.Client
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (c *client) do(method, path string, body any, hdr ...string) reply {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	} else if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			c.t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, path, err, raw)
		}
	}
	return r
}

// get fetches path and fails the test unless it answers 200.
func (c *client) get(path string) map[string]any {
	c.t.Helper()
	r := c.do(http.MethodGet, path, nil)
	if r.status != http.StatusOK {
		c.t.Fatalf("GET %s: status %d, want 200: %s", path, r.status, r.raw)
	}
	return r.body
}

// want fails the test unless r has status.
func (r reply) want(t testing.TB, status int, what string) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
	}
	return r
}

// firstSystem returns the path of the first member of /redfish/v1/Systems.
func (c *client) firstSystem() string {
	c.t.Helper()
	ms := c.get("/redfish/v1/Systems")["Members"].([]any)
	return ms[0].(map[string]any)["@odata.id"].(string)
}

// errorMessageIDs lists the MessageIds of a Redfish error body.
func errorMessageIDs(body map[string]any) []string {
	e, _ := body["error"].(map[string]any)
	infos, _ := e["@Message.ExtendedInfo"].([]any)
	var out []string
	for _, i := range infos {
		m, _ := i.(map[string]any)
		s, _ := m["MessageId"].(string)
		out = append(out, s)
	}
	return out
}
