package vbmc

import (
	"net/http"
	"testing"
)

// Gigabyte/AMI advertises InsertMedia/EjectMedia; the state shows in GET.
func TestVirtualMediaActions(t *testing.T) {
	vm := "/redfish/v1/Managers/Self/VirtualMedia/CD1"
	_, c := start(t, "gigabyte-ami-h262-z63", nil)
	if c.get(vm)["Inserted"] != false {
		t.Fatal("CD1 starts inserted")
	}
	c.do(http.MethodPost, vm+"/Actions/VirtualMedia.InsertMedia", map[string]any{}).want(t, 400, "insert without Image")
	c.do(http.MethodPost, vm+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": "http://127.0.0.1/live.iso"}).want(t, 204, "insert")
	doc := c.get(vm)
	if doc["Inserted"] != true || doc["Image"] != "http://127.0.0.1/live.iso" || doc["ImageName"] != "live.iso" {
		t.Errorf("after insert: Inserted %v Image %v ImageName %v", doc["Inserted"], doc["Image"], doc["ImageName"])
	}
	c.do(http.MethodPost, vm+"/Actions/VirtualMedia.EjectMedia", map[string]any{}).want(t, 204, "eject")
	doc = c.get(vm)
	if doc["Inserted"] != false || doc["Image"] != nil {
		t.Errorf("after eject: Inserted %v Image %v", doc["Inserted"], doc["Image"])
	}
}

// The DMTF mockups advertise no media actions: POST is refused and PATCH
// (gofish's fallback) works.
func TestVirtualMediaPatch(t *testing.T) {
	for m, vm := range map[string]string{
		"dmtf-public-rackmount1": "/redfish/v1/Systems/437XR1138R2/VirtualMedia/CD2",
		"dmtf-public-tower":      "/redfish/v1/Managers/BMC/VirtualMedia/CD1",
	} {
		t.Run(m, func(t *testing.T) {
			_, c := start(t, m, nil)
			c.do(http.MethodPost, vm+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": "http://127.0.0.1/a.iso"}).want(t, 400, "action not advertised")
			c.do(http.MethodPatch, vm, map[string]any{"Image": "http://127.0.0.1/a.iso", "Inserted": true}).want(t, 200, "PATCH insert")
			if doc := c.get(vm); doc["Image"] != "http://127.0.0.1/a.iso" || doc["Inserted"] != true {
				t.Errorf("after PATCH: %v %v", doc["Image"], doc["Inserted"])
			}
			c.do(http.MethodPatch, vm, map[string]any{"Image": nil, "Inserted": false}).want(t, 200, "PATCH eject")
			if doc := c.get(vm); doc["Image"] != nil || doc["Inserted"] != false {
				t.Errorf("after eject: %v %v", doc["Image"], doc["Inserted"])
			}
			c.do(http.MethodPatch, vm, map[string]any{"MediaTypes": []string{"CD"}}).want(t, 400, "read-only property")
		})
	}
}

// Without VirtualMedia in the mockup there is none (no invented members).
func TestVirtualMediaAbsent(t *testing.T) {
	_, c := start(t, "hpe-cray-ex235n-a100", nil)
	c.do(http.MethodGet, "/redfish/v1/Managers/BMC/VirtualMedia", nil).want(t, 404, "Cray VirtualMedia")
	c.do(http.MethodPost, "/redfish/v1/Managers/BMC/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia",
		map[string]any{"Image": "http://127.0.0.1/a.iso"}).want(t, 404, "insert on Cray")
}
