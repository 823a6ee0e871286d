package firmware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// TestApplyRequests: the requests one node's update costs, as the BMC
// sees them, against the protocol's minimum of 7 (log in, read the
// target's version, start, read the task once it ended, reset, read the
// version, log out). Logging in costs the service root, the session and
// the Systems collection (which also names the System the reset acts on);
// the plan one read of the UpdateService, its ActionInfo and the inventory
// in one $expand; the start no second read of the version the plan just
// read; the task a first read after a poll interval and the next when its
// progress says it ends (2 reads for a task of 6 poll intervals, where
// reading every interval takes 6); the reset the System and the action.
func TestApplyRequests(t *testing.T) {
	b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, "dmtf-public-rackmount1"), Username: testUser, Password: testPassword,
		Update: vbmc.Update{TaskTime: 1200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reqs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	imgs, shas := newImages(t, true, vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, ""))
	ctx := ctxT(t)
	c, err := bmc.Dial(ctx, bmc.Config{Endpoint: srv.URL, Username: testUser, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	us, err := c.UpdateService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := firmware.Options{Poll: 200 * time.Millisecond, Service: &us}
	for _, s := range firmware.Steps(firmware.MakePlan(us.Items, machine.Inventory{}, recipe.Firmware{BMC: update("1.46.0", shas[0])})) {
		if st, err := firmware.Apply(context.Background(), c, imgs, s, o, nil); err != nil {
			t.Fatalf("Apply: %v (%+v)", err, st)
		}
	}
	c.Close()
	count := func(prefix string) int {
		n := 0
		for _, r := range reqs {
			if strings.HasPrefix(r, prefix) {
				n++
			}
		}
		return n
	}
	all := strings.Join(reqs, "\n")
	if len(reqs) != 13 || count("GET /redfish/v1/TaskService/Tasks/") != 2 || count("GET /redfish/v1/UpdateService/FirmwareInventory/BMC") != 1 ||
		count("GET /redfish/v1/Systems") != 2 || count("GET /redfish/v1/UpdateService/FirmwareInventory?$expand=") != 1 {
		t.Errorf("%d requests, want 13: 3 to log in, 3 for the plan, the start, 2 task reads, 2 for the reset, the version, the logout:\n%s", len(reqs), all)
	}
	if b.FirmwareVersion(bmcTarget) != "1.46.0" {
		t.Errorf("BMC firmware %s after the update", b.FirmwareVersion(bmcTarget))
	}
}
