package httpboot

import (
	"context"
	"fmt"
	"io"
	"net"
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

// Each credential-less route, served on a real loopback listener, counts
// requests per client address: with a burst of 3 (and a refill too slow
// to matter), 20 quick requests get 3 answers and 17 429s with
// Retry-After, while another address gets its own burst. On /artifacts/
// a Range request continues a download and is never refused, even with
// the bucket empty. Before, only /ipxe was limited, and serve did not
// pass the limiter (200 answers in 1.9 s from one address).
func TestPublicRateLimitPerRoute(t *testing.T) {
	for name, c := range map[string]struct {
		path   func(*fixture) string
		ok     int  // the answer within the burst
		ranged bool // Range requests are exempt
	}{
		"ipxe":             {func(*fixture) string { return "/ipxe?mac=52:54:00:00:00:01" }, http.StatusOK, false},
		"uki":              {func(*fixture) string { return "/uki/52-54-00-00-00-01.efi" }, http.StatusOK, false},
		"boot":             {func(*fixture) string { return "/boot/ipxe.efi" }, http.StatusOK, false},
		"artifact by hash": {func(f *fixture) string { return "/artifacts/sha256/" + f.bigRef.SHA256 }, http.StatusOK, true},
		"artifact by name": {func(*fixture) string { return "/artifacts/big.img" }, http.StatusOK, true},
		"unknown artifact": {func(*fixture) string { return "/artifacts/sha256/" + strings.Repeat("0", 64) }, http.StatusNotFound, false},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, UnknownDiscover, func(c *Config) { c.Limit = ratelimit.New(0.001, 3, 0, nil) })
			url := f.srv.URL + c.path(f)
			codes := map[int]int{}
			for range 20 {
				resp := limitGet(t, "127.0.0.1", url, "")
				codes[resp.StatusCode]++
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
			}
			if codes[c.ok] != 3 || codes[http.StatusTooManyRequests] != 17 {
				t.Errorf("20 requests from one address: %v, want 3 x %d and 17 x 429", codes, c.ok)
			}
			if resp := limitGet(t, "127.0.0.2", url, ""); resp.StatusCode != c.ok {
				t.Errorf("another address: %d, want %d", resp.StatusCode, c.ok)
			}
			if !c.ranged {
				if resp := limitGet(t, "127.0.0.1", url, "bytes=100-"); resp.StatusCode != http.StatusTooManyRequests {
					t.Errorf("a Range request on %s: %d, want it counted (429)", name, resp.StatusCode)
				}
				return
			}
			for i := range 10 {
				if resp := limitGet(t, "127.0.0.1", url, fmt.Sprintf("bytes=%d-", 1000*i)); resp.StatusCode != http.StatusPartialContent {
					t.Fatalf("Range request %d with the bucket empty: %d, want 206 (a resumed download is not throttled)", i, resp.StatusCode)
				}
			}
		})
	}
}

// limitGet GETs url from the loopback address from (127.0.0.0/8 is all
// loopback), with a Range header unless rng is "".
func limitGet(t *testing.T, from, url, rng string) *http.Response {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", url, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
