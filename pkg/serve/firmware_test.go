package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/store"
)

// TestFirmwarePackages: a package is served at its job's URL, whole and by
// Range, however many Range reads a BMC makes (never rate limited), while
// the job runs; the URL is unguessable (another job's token, another
// package under the token, a made-up token: 404, and those count against
// the public limit), the same after a restart (the key is kept), and dead
// once the job ends.
func TestFirmwarePackages(t *testing.T) {
	dir := t.TempDir()
	arts, err := artifact.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img := bytes.Repeat([]byte("firmware-image-"), 4096)
	ref, err := arts.Put(context.Background(), bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := arts.Put(context.Background(), strings.NewReader("another package"))
	jobs := &jobStates{m: map[string]store.JobState{"f-1": store.JobRunning, "f-2": store.JobRunning}}
	fp, err := NewFirmwarePackages(dir, arts, jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	fp.Register(mux, ratelimit.New(0.001, 3, 0, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if _, err := fp.URL("f-1", ref.SHA256); err == nil {
		t.Error("a URL before the listener is bound")
	}
	fp.Bind(srv.URL + "/")
	u, err := fp.URL("f-1", ref.SHA256)
	if err != nil || !strings.HasPrefix(u, srv.URL+"/firmware/f-1/") || !strings.HasSuffix(u, "/"+ref.SHA256) {
		t.Fatalf("URL %q, %v", u, err)
	}
	get := func(url, rng string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := get(u, ""); code != 200 || !bytes.Equal(b, img) {
		t.Errorf("whole package: %d, %d bytes", code, len(b))
	}
	for i := range 20 { // a BMC reading by ranges: more than the limit's burst
		code, b := get(u, fmt.Sprintf("bytes=%d-%d", i*100, i*100+99))
		if code != http.StatusPartialContent || !bytes.Equal(b, img[i*100:i*100+100]) {
			t.Fatalf("range %d: %d %q", i, code, b)
		}
	}
	token := strings.Split(strings.TrimPrefix(u, srv.URL+"/firmware/"), "/")[1]
	for _, bad := range []string{
		srv.URL + "/firmware/f-2/" + token + "/" + ref.SHA256,   // another job's URL with this token
		srv.URL + "/firmware/f-1/" + token + "/" + other.SHA256, // another package under this token
		srv.URL + "/firmware/f-1/" + strings.Repeat("0", 48) + "/" + ref.SHA256,
	} {
		if code, _ := get(bad, ""); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", bad, code)
		}
	}
	if code, _ := get(srv.URL+"/firmware/f-1/"+strings.Repeat("1", 48)+"/"+ref.SHA256, ""); code != http.StatusTooManyRequests {
		t.Errorf("a fourth bad token from one address: %d, want 429", code)
	}
	if code, _ := get(u, "bytes=0-9"); code != http.StatusPartialContent {
		t.Errorf("the job's own URL after the bad ones: %d, want 206 (never limited)", code)
	}
	fp2, err := NewFirmwarePackages(dir, arts, jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	fp2.Bind(srv.URL)
	if u2, _ := fp2.URL("f-1", ref.SHA256); u2 != u {
		t.Errorf("after a restart the URL is %s, was %s", u2, u)
	}
	jobs.set("f-1", store.JobSucceeded)
	if code, _ := get(u, "bytes=0-9"); code != http.StatusNotFound {
		t.Errorf("after the job ended: %d, want 404", code)
	}
}
