package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

func validTask() Task {
	return Task{
		MachineID: "m1", Recipe: "lab-qemu", Mode: ModeProvision,
		Image:   Image{URL: "http://10.77.0.1:8080/images/lab.raw.zst", SHA256: strings.Repeat("ab", 32), Format: FormatRawZstd, Size: 123},
		Disk:    recipe.DiskSpec{Boot: true, MinSize: 1 << 30},
		Checks:  []recipe.Check{{Name: "gpu-count", Min: recipe.Number(8)}},
		Handoff: HandoffReboot,
	}
}

func TestClientTaskRetriesAndAuth(t *testing.T) {
	var calls atomic.Int32
	want := validTask()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := BearerToken(r); !ok || tok != "s3cret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != PathTask || r.Method != http.MethodGet {
			http.Error(w, "wrong path", http.StatusNotFound)
			return
		}
		if calls.Add(1) < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(want)
	}))
	defer srv.Close()
	c := NewAgentClient(srv.URL, "s3cret", nil)
	c.Backoff = time.Millisecond
	got, err := c.Task(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task (-want +got):\n%s", diff)
	}
	if calls.Load() != 3 {
		t.Errorf("calls = %d, want 3 (two 503 retried)", calls.Load())
	}

	calls.Store(0)
	bad := NewAgentClient(srv.URL, "wrong", nil)
	bad.Backoff = time.Millisecond
	_, err = bad.Task(context.Background())
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: err = %v, want a 401 StatusError", err)
	}
	if calls.Load() != 0 {
		t.Errorf("401 must not be retried past the handler")
	}
}

func TestClientPostsBodies(t *testing.T) {
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: content-type %q", r.URL.Path, r.Header.Get("Content-Type"))
		}
		got[r.URL.Path] = strings.TrimSpace(string(b))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := NewAgentClient(srv.URL+"/", "t", nil)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Progress(ctx, Progress{Step: StepImage, Bytes: 10, Total: 20, RateBps: 5}))
	must(c.Checks(ctx, nil))
	must(c.Log(ctx, []string{"a", "b"}))
	must(c.Done(ctx, Done{Step: StepImage, OK: false, Reason: "sha256 mismatch"}))
	want := map[string]string{
		PathProgress: `{"step":"image","bytes":10,"total":20,"rate_bps":5}`,
		PathChecks:   `[]`,
		PathLog:      `{"lines":["a","b"]}`,
		PathDone:     `{"step":"image","ok":false,"reason":"sha256 mismatch"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
}

func TestClientGivesUpOnConnectionErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	c := NewAgentClient(url, "t", nil)
	c.Attempts, c.Backoff = 3, time.Millisecond
	if err := c.Done(context.Background(), Done{OK: true}); err == nil || !strings.Contains(err.Error(), "giving up after 3 attempts") {
		t.Fatalf("err = %v, want giving up after 3 attempts", err)
	}
}

func TestTaskValidate(t *testing.T) {
	tests := map[string]struct {
		edit func(*Task)
		want string // substring of the error; "" = valid
	}{
		"valid":             {func(*Task) {}, ""},
		"discover no image": {func(t *Task) { t.Mode = ModeDiscover; t.Image = Image{} }, ""},
		"bad mode":          {func(t *Task) { t.Mode = "wipe" }, "mode"},
		"bad handoff":       {func(t *Task) { t.Handoff = "pxe" }, "handoff"},
		"no url":            {func(t *Task) { t.Image.URL = "" }, "image.url is empty"},
		"file url":          {func(t *Task) { t.Image.URL = "file:///etc/passwd" }, "http://"},
		"short sha":         {func(t *Task) { t.Image.SHA256 = "abc" }, "64 lowercase hex"},
		"upper sha":         {func(t *Task) { t.Image.SHA256 = strings.Repeat("AB", 32) }, "64 lowercase hex"},
		"bad format":        {func(t *Task) { t.Image.Format = "qcow2" }, "format"},
		"negative size":     {func(t *Task) { t.Image.Size = -1 }, "negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task := validTask()
			tc.edit(&task)
			err := task.Validate()
			if tc.want == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func FuzzDecodeTask(f *testing.F) {
	b, _ := json.Marshal(validTask())
	f.Add(b)
	f.Add([]byte(`{"mode":"discover"}`))
	f.Add([]byte(`{"mode":"provision","image":{"url":"http://x","sha256":"00"}}`))
	f.Add([]byte(`{"disk":{"min_size":"1GiB"},"checks":[{"name":"x","args":{"a":"b"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := DecodeTask(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		// A task that decoded is valid, and its image survives a round trip.
		if err := task.Validate(); err != nil {
			t.Fatalf("decoded task does not validate: %v", err)
		}
		out, err := json.Marshal(task.Image)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		var img Image
		if err := json.Unmarshal(out, &img); err != nil || img != task.Image {
			t.Fatalf("image round trip: %+v -> %s -> %+v (%v)", task.Image, out, img, err)
		}
	})
}
