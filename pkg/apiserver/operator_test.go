package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// Each wire type the OpenAPI document names has exactly the document's
// properties: the document and pkg/api/operator cannot drift apart.
func TestOpenAPIMatchesWireTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{wire.Error{}, wire.Job{}, wire.ReimageStatus{}, wire.Phase{}, wire.CheckResult{}, wire.RolloutStatus{},
		wire.WaveReport{}, wire.WaveNode{}, wire.CancelRequest{}, wire.SetRecipeRequest{}, wire.WaiverRequest{},
		wire.Finding{}, wire.Inspection{}, wire.Snapshot{}, wire.InventoryDiff{}, wire.ReimageRequest{}, wire.Plan{},
		wire.ReimageResult{}, wire.RolloutRequest{}, wire.TokenRequest{}, wire.Token{}, wire.TokenCreated{}, wire.Image{},
		wire.Version{}, wire.Secret{}, wire.SecretRequest{}, wire.KeyRotation{}, wire.BMCRotateRequest{}, wire.BMCRotation{},
		wire.Alert{}, wire.SilenceRequest{}, wire.Silence{}, wire.Reading{}, wire.PowerReport{}, wire.NodePower{}, wire.RackPower{},
		wire.CapacityPlan{}, wire.RackRoom{}, wire.DrillCandidateRequest{}, wire.DrillRequest{}, wire.Drill{}, wire.RecipeReadiness{},
		wire.FirmwarePlan{}, wire.FirmwareEntry{}, wire.FirmwarePackage{}, wire.FirmwareApplyRequest{}, wire.FirmwareStatus{},
		wire.FirmwareNodeStatus{}, wire.FirmwareStep{},
		machine.Machine{}} {
		typ := reflect.TypeOf(v)
		schema, ok := doc.Components.Schemas[typ.Name()]
		if !ok {
			t.Errorf("openapi.yaml has no schema %s", typ.Name())
			continue
		}
		var fields, props []string
		for i := range typ.NumField() {
			if tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
				fields = append(fields, tag)
			}
		}
		for p := range schema.Properties {
			props = append(props, p)
		}
		sort.Strings(fields)
		sort.Strings(props)
		if d := cmp.Diff(props, fields); d != "" {
			t.Errorf("schema %s and %s differ (-documented +wire):\n%s", typ.Name(), typ, d)
		}
	}
}

// The operator routes over the fleet core: enrolment rules, mid-job refusals
// naming the job, tokens with scopes, paging, cancel, the version header.
func TestOperatorRoutes(t *testing.T) {
	f := newFixture(t)
	steps := []struct {
		name, method, path string
		body               any
		code               int
		want               string
	}{
		{"state at enrolment", "POST", "/api/v1/machines", machine.Machine{Name: "node3", MACs: []string{"52:54:00:00:00:03"}, State: "ready"}, 400, "never at enrolment"},
		{"injection in a name", "POST", "/api/v1/machines", machine.Machine{Name: "n3 initrd=evil", MACs: []string{"52:54:00:00:00:03"}}, 400, "DNS-style"},
		{"enrol", "POST", "/api/v1/machines", machine.Machine{Name: "node3", MACs: []string{"52:54:00:00:00:03"}, Recipe: "lab-qemu"}, 201, `"state": "enrolled"`},
		{"page 1", "GET", "/api/v1/machines?limit=2", nil, 200, `"node2"`},
		{"page 2", "GET", "/api/v1/machines?limit=2&after=node2", nil, 200, `"node3"`},
		{"unknown recipe", "PUT", "/api/v1/machines/node3/recipe", wire.SetRecipeRequest{Recipe: "nope"}, 400, `recipe \"nope\": unknown recipe`},
		{"unassign", "PUT", "/api/v1/machines/node3/recipe", wire.SetRecipeRequest{}, 200, `"name": "node3"`},
		{"reimage", "POST", "/api/v1/reimage", wire.ReimageRequest{Machines: []string{"node1"}}, 202, `"state": "running"`},
		{"set-recipe mid-job", "PUT", "/api/v1/machines/node1/recipe", wire.SetRecipeRequest{Recipe: "lab-qemu"}, 409, "is in a running job j-"},
		{"rm mid-job", "DELETE", "/api/v1/machines/node1", nil, 409, "is in a running job j-"},
		{"inspect mid-job", "POST", "/api/v1/machines/node1/inspect", nil, 409, "is in a running job"},
		{"bad token scope", "POST", "/api/v1/tokens", wire.TokenRequest{Name: "ci", Scope: "root"}, 400, `scope \"root\": expected operator or read-only`},
		{"version", "GET", "/api/v1/version", nil, 200, `"version": "test-1"`},
		{"images", "GET", "/api/v1/images", nil, 200, "[]"},
	}
	for _, s := range steps {
		code, body := f.do(t, s.method, s.path, f.operator, s.body)
		if code != s.code || !strings.Contains(string(body), s.want) {
			t.Errorf("%s: %s %s = %d %s; want %d with %q", s.name, s.method, s.path, code, body, s.code, s.want)
		}
	}
	// Pages: the first holds node1 and node2 only.
	if _, body := f.do(t, "GET", "/api/v1/machines?limit=2", f.operator, nil); strings.Contains(string(body), "node3") {
		t.Errorf("page 1 holds node3: %s", body)
	}
	// The running job, cancelled: node1 turns failed and may be removed.
	_, body := f.do(t, "GET", "/api/v1/jobs?state=running", f.operator, nil)
	var jobs []wire.Job
	if err := json.Unmarshal(body, &jobs); err != nil || len(jobs) != 1 {
		t.Fatalf("running jobs: %s", body)
	}
	if code, body := f.do(t, "POST", "/api/v1/jobs/"+jobs[0].ID+"/cancel", f.operator, wire.CancelRequest{Reason: "wrong rack"}); code != 200 || !strings.Contains(string(body), `"state": "cancelled"`) {
		t.Errorf("cancel: %d %s", code, body)
	}
	if code, body := f.do(t, "POST", "/api/v1/jobs/"+jobs[0].ID+"/cancel", f.operator, nil); code != 409 {
		t.Errorf("second cancel: %d %s, want 409", code, body)
	}
	if code, body := f.do(t, "DELETE", "/api/v1/machines/node1", f.operator, nil); code != 204 {
		t.Errorf("rm after cancel: %d %s", code, body)
	}
}

func TestTokenScopes(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(t, "POST", "/api/v1/tokens", f.operator, wire.TokenRequest{Name: "viewer", Scope: "read-only", TTL: "1h"})
	var made wire.TokenCreated
	if err := json.Unmarshal(body, &made); code != 201 || err != nil || made.Secret == "" || made.Token.Expires.IsZero() {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := f.do(t, "GET", "/api/v1/machines", made.Secret, nil); code != 200 {
		t.Errorf("read-only GET: %d %s", code, body)
	}
	if code, body := f.do(t, "POST", "/api/v1/reimage", made.Secret, wire.ReimageRequest{Machines: []string{"node1"}}); code != 403 || !strings.Contains(string(body), "read-only") {
		t.Errorf("read-only POST: %d %s, want 403", code, body)
	}
	_, body = f.do(t, "GET", "/api/v1/tokens", f.operator, nil)
	if strings.Contains(string(body), "hash") || !strings.Contains(string(body), "viewer") {
		t.Errorf("token list %s: want viewer, never a hash", body)
	}
	if code, _ := f.do(t, "DELETE", "/api/v1/tokens/"+made.Token.ID, f.operator, nil); code != 204 {
		t.Errorf("revoke: %d", code)
	}
	if code, _ := f.do(t, "GET", "/api/v1/machines", made.Secret, nil); code != 401 {
		t.Errorf("revoked token: %d, want 401 at once, without a restart", code)
	}
}

// Two operators cannot overwrite each other: a change sent with the ETag
// it read fails with 412 when another change came first.
func TestIfMatch(t *testing.T) {
	f := newFixture(t)
	etagOf := func() string {
		req, _ := http.NewRequest("GET", f.url+"/api/v1/machines/node2", nil)
		req.Header.Set("Authorization", "Bearer "+f.operator)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("ETag")
	}
	put := func(etag string) (int, string) {
		b, _ := json.Marshal(wire.SetRecipeRequest{Recipe: ""})
		req, _ := http.NewRequest("PUT", f.url+"/api/v1/machines/node2/recipe", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+f.operator)
		if etag != "" {
			req.Header.Set("If-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	alice := etagOf()
	bob := etagOf()
	if alice == "" || alice != bob {
		t.Fatalf("ETags %q and %q: want the same revision for both readers", alice, bob)
	}
	if code, body := put(alice); code != 200 {
		t.Fatalf("first change: %d %s", code, body)
	}
	if code, body := put(bob); code != http.StatusPreconditionFailed || !strings.Contains(body, "stale") {
		t.Errorf("second change on the old ETag: %d %s, want 412", code, body)
	}
	if code, _ := put(`"x"`); code != 400 {
		t.Errorf("If-Match \"x\": %d, want 400", code)
	}
	if code, body := put(etagOf()); code != 200 {
		t.Errorf("change on the fresh ETag: %d %s", code, body)
	}
}

// countedBody counts what the server's handlers read of a request body.
type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Bodies are bounded per route and read only after the caller is known:
// a 16 MiB inventory from an address tied to no machine is refused before
// the server reads it (it used to decode all of it first: +165 MB RSS);
// an oversize operator request gets 413; two JSON values in one body, 400.
func TestBodyLimits(t *testing.T) {
	f := newFixture(t)
	var read atomic.Int64
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countedBody{r.Body, &read}
		f.srv.Handler().ServeHTTP(w, r)
	}))
	defer counted.Close()
	resp, err := http.Post(counted.URL+"/api/v1/agent/inventory?mac=52:54:00:00:00:01", "application/json",
		strings.NewReader(strings.Repeat(" ", 16<<20)))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("untied inventory by MAC: %d, want 403", resp.StatusCode)
		}
	}
	if n := read.Load(); n != 0 {
		t.Errorf("the API read %d bytes of the body of a caller it had not tied to a machine", n)
	}
	big := strings.Repeat("x", 2<<20)
	if code, b := f.do(t, "POST", "/api/v1/machines", f.operator, map[string]any{"name": big}); code != http.StatusRequestEntityTooLarge {
		t.Errorf("2 MiB enrolment: %d %.200s, want 413", code, b)
	}
	req, _ := http.NewRequest("POST", f.url+"/api/v1/machines", strings.NewReader(`{"name":"n9","macs":["52:54:00:00:00:09"]}{"name":"n10"}`))
	req.Header.Set("Authorization", "Bearer "+f.operator)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("two JSON values: %d, want 400", resp.StatusCode)
	}
}

// An expired token is refused and removed at its first use after expiry.
func TestExpiredTokenRemoved(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	f.clock.Set(now)
	_, body := f.do(t, "POST", "/api/v1/tokens", f.operator, wire.TokenRequest{Name: "brief", TTL: "1h"})
	var made wire.TokenCreated
	if err := json.Unmarshal(body, &made); err != nil {
		t.Fatal(err)
	}
	f.clock.Set(now.Add(2 * time.Hour))
	if code, body := f.do(t, "GET", "/api/v1/machines", made.Secret, nil); code != 401 || !strings.Contains(string(body), "expired") {
		t.Errorf("expired token: %d %s, want 401 saying it expired", code, body)
	}
	if _, err := f.s.TokenByHash(context.Background(), agentauth.Hash(made.Secret)); err == nil {
		t.Error("the expired token is still stored")
	}
}
