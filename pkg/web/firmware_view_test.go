package web

import (
	"net/http/httptest"
	"strings"
	"testing"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// TestFirmwareJobPage: a firmware campaign's job page shows its counts,
// a cancel in progress, its windows and each node's state, packages and
// the BMC's message; a reimage's firmware step shows before the image.
func TestFirmwareJobPage(t *testing.T) {
	as, err := loadAssets()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parsePages(as)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{pages: ps}
	pkg := "5d1e7a0c9b3f2e4d6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f"
	step := wire.FirmwareStep{Package: pkg, Targets: []string{"GPU0", "GPU1"}, Phase: "failed"}
	camp := &wire.Job{ID: "f-1", Kind: "firmware", State: "running", Firmware: &wire.FirmwareStatus{
		Total: 2, Done: 1, Failed: 1, Cancel: "operator:alice: the window moved", Windows: []string{"days=sat 22:00-04:00"},
		Nodes: []wire.FirmwareNodeStatus{
			{Name: "gpu-01", Rack: "r1", State: "done", Steps: []wire.FirmwareStep{{Package: pkg, Targets: []string{"BMC"}, Phase: "done"}}},
			{Name: "gpu-02", Rack: "r1", State: "failed", Message: "Flash write error at 0x4000", Steps: []wire.FirmwareStep{step}},
		}}}
	reimage := &wire.Job{ID: "r-1", Kind: "reimage", State: "running", Reimage: &wire.ReimageStatus{
		Firmware: &wire.FirmwareNodeStatus{Name: "gpu-03", State: "running", Steps: []wire.FirmwareStep{{Package: pkg, Targets: []string{"BIOS"}, Phase: "reset"}}}}}
	for _, tc := range []struct {
		job  *wire.Job
		want []string
	}{
		{camp, []string{"Firmware campaign", "2 nodes: 1 done, 1 failed, 0 waiting, 0 running", "Cancelling: operator:alice: the window moved",
			"days=sat 22:00-04:00", `href="/ui/machines/gpu-02"`, "Flash write error at 0x4000", "5d1e7a0c9b3f</code> GPU0, GPU1: failed"}},
		{reimage, []string{"Firmware before the image", "running", "5d1e7a0c9b3f</code> BIOS: reset"}},
	} {
		rec := httptest.NewRecorder()
		if err := s.render(rec, httptest.NewRequest("GET", "/ui/jobs/"+tc.job.ID, nil), 200, "job", &session{}, "Job", jobPageView{Job: jobViewOf(tc.job)}); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("job %s's page lacks %q", tc.job.ID, w)
			}
		}
	}
}
