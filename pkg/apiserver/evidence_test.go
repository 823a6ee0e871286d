package apiserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// A job's evidence bundle holds the job, the recipe it ran, the machine's
// events during it and a README naming what was not collected.
func TestEvidenceBundle(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(t, "POST", "/api/v1/reimage", f.operator, wire.ReimageRequest{Machines: []string{"node1"}})
	if code != 202 {
		t.Fatalf("reimage: %d %s", code, body)
	}
	var res []wire.ReimageResult
	json.Unmarshal(body, &res)
	m, _ := f.s.GetMachine(context.Background(), "node1")
	f.waitBooting(t, m.ID)
	code, body = f.do(t, "GET", "/api/v1/jobs/"+res[0].Job.ID+"/evidence", f.operator, nil)
	if code != 200 {
		t.Fatalf("evidence: %d %s", code, body)
	}
	gz, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	dir := res[0].Job.ID + "/"
	for name, want := range map[string]string{"README.txt": "Not collected", "job.json": res[0].Job.ID, "recipe.json": `"lab-qemu"`,
		"events.json": "reimage requested", "restore.txt": "time to restore"} {
		if !strings.Contains(files[dir+name], want) {
			t.Errorf("%s lacks %q:\n%.300s", name, want, files[dir+name])
		}
	}
	if code, _ := f.do(t, "GET", "/api/v1/jobs/j-nope/evidence", f.operator, nil); code != 404 {
		t.Errorf("unknown job: %d", code)
	}
}
