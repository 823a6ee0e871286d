package httpboot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// /ipxe issues boot credentials and needs none: one address gets its
// burst, then 429 with Retry-After, while another address is served. The
// agent's command line names the TLS API and the certificate to pin.
func TestIPXERateLimitAndAPIArgs(t *testing.T) {
	arts, _ := artifact.Open(t.TempDir())
	k, _ := arts.Put(context.Background(), strings.NewReader("kernel"))
	rc := &recipe.Recipe{Name: "r", Version: "1"}
	rc.OS.Agent = recipe.AgentBoot{Kernel: recipe.Artifact{SHA256: k.SHA256}, Initrd: recipe.Artifact{SHA256: k.SHA256}}
	fp := "sha256:" + strings.Repeat("ab", 32)
	h, err := New(Config{ServerURL: "http://10.77.0.1:8080", APIURL: "https://10.77.0.1:8443", CAFingerprint: fp,
		Machines:  fakeMachines{"52:54:00:00:00:01": {ID: "m-1", Name: "n1", Recipe: "r", State: machine.StateProvisioning}},
		Recipes:   func(string) (*recipe.Recipe, error) { return rc, nil },
		Tokens:    fixedToken("tok"),
		Artifacts: arts,
		Limit:     ratelimit.New(1, 2, 0, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	get := func(from string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/ipxe?mac=52:54:00:00:00:01&arch=bios", nil)
		r.RemoteAddr = from + ":1234"
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	first := get("10.77.0.50")
	if first.Code != 200 || !strings.Contains(first.Body.String(), "ingot.api=https://10.77.0.1:8443 ingot.ca="+fp) {
		t.Fatalf("first /ipxe: %d\n%s", first.Code, first.Body)
	}
	get("10.77.0.50")
	if w := get("10.77.0.50"); w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("third /ipxe within the burst of 2: %d (Retry-After %q), want 429", w.Code, w.Header().Get("Retry-After"))
	}
	if w := get("10.77.0.51"); w.Code != 200 {
		t.Errorf("another address: %d, want 200", w.Code)
	}
	if _, err := New(Config{ServerURL: "http://x", APIURL: "http://10.77.0.1:8443", Machines: fakeMachines{}, Recipes: func(string) (*recipe.Recipe, error) { return rc, nil },
		Tokens: fixedToken("t"), Artifacts: arts}); err == nil {
		t.Error("an http:// API URL without a fingerprint was accepted")
	}
}
