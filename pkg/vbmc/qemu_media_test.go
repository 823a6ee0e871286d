package vbmc

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// isoServer serves body at /job/agent.iso and counts the fetches.
func isoServer(t *testing.T, body []byte) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/job/agent.iso" {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/job/agent.iso", &n
}

// cdDrive returns the CD drive's file and -device value in QEMU's
// arguments ("", "" when it has none).
func cdDrive(args []string) (file, device string) {
	for i, a := range args {
		if i+1 >= len(args) {
			break
		}
		v := args[i+1]
		switch {
		case a == "-drive" && strings.Contains(v, "media=cdrom"):
			_, file, _ = strings.Cut(v, "file=")
		case a == "-device" && strings.HasPrefix(v, "ide-cd,"):
			device = v
		}
	}
	return file, device
}

// An image inserted through the BMC's InsertMedia action reaches the VM:
// fetched at power-on, attached as a CD drive that a one-time Cd override
// boots first (bootindex=0, before the machine's own devices), still
// attached (not fetched again, no longer first) at the next power-on, and
// gone after EjectMedia. The event log records insert, boot and eject.
func TestQEMUVirtualMediaBoot(t *testing.T) {
	logFile, _ := fakeQEMU(t)
	iso := bytes.Repeat([]byte("ingot agent CD "), 5000)
	url, fetches := isoServer(t, iso)
	mediaDir := t.TempDir()
	q := &QEMU{Args: []string{"-m", "512"}, MediaDir: mediaDir,
		BootArgs: map[string][]string{"Cd": {"-device", "virtio-blk-pci,drive=d0,bootindex=1"}}}
	t.Cleanup(func() { _ = q.PowerOff(t.Context()) })
	sys, vm := "/redfish/v1/Systems/Self", "/redfish/v1/Managers/Self/VirtualMedia/CD1"
	b, c := start(t, "gigabyte-ami-h262-z63", func(cfg *Config) { cfg.Backend = q })
	reset := func(rt string, n int) []string {
		t.Helper()
		c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt}).want(t, 204, rt)
		eventually(t, "QEMU start", func() bool { return len(runs(t, logFile)) == n })
		return runs(t, logFile)[n-1]
	}

	c.do(http.MethodPost, vm+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": url, "Inserted": true, "WriteProtected": true}).want(t, 204, "insert")
	if q.Media() != url {
		t.Fatalf("backend media = %q, want %q", q.Media(), url)
	}
	c.do(http.MethodPatch, sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}).want(t, 200, "override Cd")
	args := reset("On", 1)
	file, dev := cdDrive(args)
	if dev != "ide-cd,drive=vcd0,bootindex=0" {
		t.Errorf("Cd boot: CD device %q, want ide-cd,drive=vcd0,bootindex=0; args %q", dev, args)
	}
	if !slices.Contains(args, "virtio-blk-pci,drive=d0,bootindex=1") {
		t.Errorf("Cd boot: the machine's own BootArgs for Cd are missing: %q", args)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, iso) {
		t.Fatalf("the CD drive's file %q does not hold the inserted image (%v, %d bytes)", file, err, len(got))
	}

	args = reset("ForceRestart", 2)
	if f, dev := cdDrive(args); f != file || dev != "ide-cd,drive=vcd0" {
		t.Errorf("after the one-time Cd boot: CD %q %q, want %q still attached without bootindex", f, dev, file)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("the image was fetched %d times, want once (same URL)", n)
	}

	c.do(http.MethodPost, vm+"/Actions/VirtualMedia.EjectMedia", map[string]any{}).want(t, 204, "eject")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the local copy %s outlived the eject: %v", file, err)
	}
	args = reset("ForceRestart", 3)
	if f, dev := cdDrive(args); f != "" || dev != "" {
		t.Errorf("after eject: CD %q %q still attached", f, dev)
	}
	var sel []string
	for _, e := range b.LogEntries() {
		sel = append(sel, e.Message)
	}
	for _, want := range []string{"Virtual media " + url + " was inserted", "boot source override Cd", "Virtual media was ejected"} {
		if !strings.Contains(strings.Join(sel, "\n"), want) {
			t.Errorf("the event log lacks %q:\n%s", want, strings.Join(sel, "\n"))
		}
	}
}

// Inserting through PATCH (gofish's path on BMCs without the actions)
// reaches the backend too; an image the VM cannot fetch fails the power-on
// with the reason, and a URL that is not http(s) is refused at once.
func TestQEMUVirtualMediaPatchAndFailures(t *testing.T) {
	logFile, _ := fakeQEMU(t)
	q := &QEMU{Args: []string{"-m", "512"}, MediaDir: t.TempDir()}
	t.Cleanup(func() { _ = q.PowerOff(t.Context()) })
	sys, vm := "/redfish/v1/Systems/437XR1238R2", "/redfish/v1/Managers/BMC/VirtualMedia/CD1"
	_, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Backend = q })

	before := c.get(vm)["Image"]
	c.do(http.MethodPatch, vm, map[string]any{"Image": "nfs://10.0.0.1/agent.iso", "Inserted": true}).want(t, 400, "nfs image")
	if q.Media() != "" || c.get(vm)["Image"] != before {
		t.Errorf("a refused insert left media %q, Image %v (was %v)", q.Media(), c.get(vm)["Image"], before)
	}
	url, _ := isoServer(t, []byte("cd"))
	missing := strings.Replace(url, "/job/", "/gone/", 1)
	c.do(http.MethodPatch, vm, map[string]any{"Image": missing, "Inserted": true}).want(t, 200, "PATCH insert")
	if q.Media() != missing {
		t.Fatalf("backend media after PATCH = %q, want %q", q.Media(), missing)
	}
	r := c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"})
	r.want(t, 500, "power on with an image that cannot be fetched")
	if !strings.Contains(string(r.raw), "404") {
		t.Errorf("the power-on error does not say why: %s", r.raw)
	}
	if n := len(runs(t, logFile)); n != 0 {
		t.Errorf("QEMU started %d times without its CD", n)
	}
	c.do(http.MethodPatch, vm, map[string]any{"Image": nil, "Inserted": false}).want(t, 200, "PATCH eject")
	if q.Media() != "" {
		t.Errorf("backend media after PATCH eject = %q", q.Media())
	}
	c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}).want(t, 204, "power on, empty drive")
	eventually(t, "QEMU start", func() bool { return len(runs(t, logFile)) == 1 })
	if f, dev := cdDrive(runs(t, logFile)[0]); f != "" || dev != "" {
		t.Errorf("empty drive: CD %q %q attached", f, dev)
	}
}

func TestMediaChange(t *testing.T) {
	for name, tc := range map[string]struct {
		body  map[string]any
		image string
		set   bool
	}{
		"insert":                {map[string]any{"Image": "http://x/a.iso"}, "http://x/a.iso", true},
		"insert, inserted":      {map[string]any{"Image": "http://x/a.iso", "Inserted": true}, "http://x/a.iso", true},
		"image, not inserted":   {map[string]any{"Image": "http://x/a.iso", "Inserted": false}, "", true},
		"image null":            {map[string]any{"Image": nil}, "", true},
		"image empty":           {map[string]any{"Image": ""}, "", true},
		"inserted false alone":  {map[string]any{"Inserted": false}, "", true},
		"write protection only": {map[string]any{"WriteProtected": false}, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			img, set := mediaChange(tc.body)
			if img != tc.image || set != tc.set {
				t.Errorf("mediaChange(%v) = %q, %v; want %q, %v", tc.body, img, set, tc.image, tc.set)
			}
		})
	}
}
