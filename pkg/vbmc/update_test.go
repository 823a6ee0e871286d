package vbmc

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a test clock moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// imageServer serves img at /fw.bin on loopback.
func imageServer(t *testing.T, img []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(img) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/fw.bin"
}

const bmcItem = "/redfish/v1/UpdateService/FirmwareInventory/BMC"

// TestSimpleUpdateTaskAndReset: SimpleUpdate fetches the ImageURI into a
// task that runs for the scripted time; the version changes at the host
// boot after it (OnReset), and the BMC's Manager shows it too.
func TestSimpleUpdateTaskAndReset(t *testing.T) {
	clk := newClock()
	b, c := start(t, "dmtf-public-rackmount1", func(cfg *Config) {
		cfg.Now = clk.Now
		cfg.Update = Update{TaskTime: 30 * time.Second}
	})
	uri := imageServer(t, FirmwareImage(map[string]string{"BMC": "1.46.0"}, ""))
	r := c.do(http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
		map[string]any{"ImageURI": uri, "TransferProtocol": "HTTP", "Targets": []string{bmcItem}}).want(t, http.StatusAccepted, "SimpleUpdate")
	mon := r.header.Get("Location")
	if !strings.HasSuffix(mon, "/Monitor") || r.body["TaskState"] != "Running" {
		t.Fatalf("SimpleUpdate answered Location %q, body %v", mon, r.body)
	}
	c.do(http.MethodGet, mon, nil).want(t, http.StatusAccepted, "monitor while running")
	clk.add(31 * time.Second)
	done := c.do(http.MethodGet, mon, nil).want(t, http.StatusOK, "monitor when done")
	if done.body["TaskState"] != "Completed" {
		t.Fatalf("task after its time: %v", done.body)
	}
	if v := b.FirmwareVersion(bmcItem); v != "1.45.455b66-rev4" {
		t.Fatalf("version before the reset: %s, want the old one (OnReset)", v)
	}
	sys := c.firstSystem()
	c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceRestart"}).want(t, http.StatusNoContent, "reset")
	if v := b.FirmwareVersion(bmcItem); v != "1.46.0" {
		t.Errorf("version after the reset: %s, want 1.46.0", v)
	}
	if mgr := c.get("/redfish/v1/Managers/BMC"); mgr["FirmwareVersion"] != "1.46.0" {
		t.Errorf("Manager FirmwareVersion %v, want 1.46.0", mgr["FirmwareVersion"])
	}
	if st := b.UpdateStats(); st.Starts != 1 || st.Flashes[bmcItem] != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestMultipartPushAndFaults: a multipart push starts a task; the
// scripted faults act as documented.
func TestMultipartPushAndFaults(t *testing.T) {
	img := FirmwareImage(map[string]string{"BMC": "1.46.0"}, "Immediate")
	for name, tc := range map[string]struct {
		update Update
		check  func(t *testing.T, b *BMC, c *client, clk *clock, mon string)
	}{
		"immediate": {Update{Multipart: true}, func(t *testing.T, b *BMC, c *client, clk *clock, mon string) {
			clk.add(2 * time.Second)
			if v := b.FirmwareVersion(bmcItem); v != "1.46.0" {
				t.Errorf("version %s, want 1.46.0 when the task ends (Immediate)", v)
			}
			item := c.get(bmcItem)
			if m, _ := item["Measurement"].(map[string]any); m["Measurement"] != digest(img) {
				t.Errorf("Measurement %v, want the image's sha256", item["Measurement"])
			}
		}},
		"task fails": {Update{Multipart: true, FailMessage: "Flash write error at 0x4000"}, func(t *testing.T, b *BMC, c *client, clk *clock, mon string) {
			clk.add(2 * time.Second)
			task := c.get(strings.TrimSuffix(mon, "/Monitor"))
			if task["TaskState"] != "Exception" || !strings.Contains(string(mustJSON(t, task["Messages"])), "Flash write error") {
				t.Errorf("failed task %v", task)
			}
			if v := b.FirmwareVersion(bmcItem); v == "1.46.0" {
				t.Error("a failed task changed the version")
			}
		}},
		"unchanged": {Update{Multipart: true, Unchanged: true}, func(t *testing.T, b *BMC, c *client, clk *clock, mon string) {
			clk.add(2 * time.Second)
			if c.get(strings.TrimSuffix(mon, "/Monitor"))["TaskState"] != "Completed" || b.FirmwareVersion(bmcItem) == "1.46.0" {
				t.Error("Unchanged: want the task Completed and the version as it was")
			}
		}},
		"too many pushes": {Update{Multipart: true, MaxUpdates: 1}, func(t *testing.T, b *BMC, c *client, clk *clock, mon string) {
			r := push(t, c, img)
			if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
				t.Errorf("a second push while one runs: %d %s, want 503 with Retry-After", r.status, r.raw)
			}
			clk.add(2 * time.Second)
			push(t, c, img).want(t, http.StatusAccepted, "a push after the first ended")
		}},
		"restart mid-update": {Update{Multipart: true, RestartAfter: 500 * time.Millisecond, RestartFor: 5 * time.Second, ForgetTasks: true},
			func(t *testing.T, b *BMC, c *client, clk *clock, mon string) {
				clk.add(time.Second)
				if _, err := c.hc.Get(c.base + "/redfish/v1"); err == nil {
					t.Error("a request during the restart was answered; want the connection closed")
				}
				clk.add(5 * time.Second)
				if n := b.OpenSessions(); n != 0 {
					t.Errorf("%d sessions survived the restart", n)
				}
				c.do(http.MethodGet, mon, nil).want(t, http.StatusNotFound, "the forgotten task's monitor")
				if v := b.FirmwareVersion(bmcItem); v != "1.46.0" {
					t.Errorf("version after the restart %s, want 1.46.0", v)
				}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			b, c := start(t, "dmtf-public-rackmount1", func(cfg *Config) { cfg.Now = clk.Now; cfg.Update = tc.update })
			r := push(t, c, img).want(t, http.StatusAccepted, "multipart push")
			tc.check(t, b, c, clk, r.header.Get("Location"))
		})
	}
}

func push(t *testing.T, c *client, img []byte) reply {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	pw, _ := w.CreateFormField("UpdateParameters")
	_, _ = pw.Write([]byte(`{"Targets": ["` + bmcItem + `"]}`))
	fw, _ := w.CreateFormFile("UpdateFile", "fw.bin")
	_, _ = fw.Write(img)
	w.Close()
	req, _ := http.NewRequest(http.MethodPost, c.base+multipartPath, &buf)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.SetBasicAuth(c.user, c.pass)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, raw: raw.Bytes()}
}

// TestForeignImageAndRollback: an image that is not the BMC's fails its
// task; a rollback restores the version before the last flash.
func TestForeignImageAndRollback(t *testing.T) {
	clk := newClock()
	b, c := start(t, "dmtf-public-rackmount1", func(cfg *Config) { cfg.Now = clk.Now; cfg.Update = Update{ApplyTime: "Immediate"} })
	r := c.do(http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
		map[string]any{"ImageURI": imageServer(t, []byte("MZ\x90\x00 not ours"))}).want(t, http.StatusAccepted, "foreign image")
	if r.body["TaskState"] != "Exception" {
		t.Errorf("a foreign image: task %v, want Exception", r.body)
	}
	c.do(http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
		map[string]any{"ImageURI": imageServer(t, FirmwareImage(map[string]string{"bmc": "2.0"}, ""))}).want(t, http.StatusAccepted, "update")
	clk.add(2 * time.Second)
	if v := b.FirmwareVersion(bmcItem); v != "2.0" {
		t.Fatalf("version %s, want 2.0", v)
	}
	c.do(http.MethodPost, rollbackPath, map[string]any{"Targets": []string{bmcItem}}).want(t, http.StatusNoContent, "rollback")
	if v := b.FirmwareVersion(bmcItem); v != "1.45.455b66-rev4" {
		t.Errorf("version after rollback %s, want 1.45.455b66-rev4", v)
	}
	c.do(http.MethodPost, rollbackPath, map[string]any{"Targets": []string{bmcItem}}).want(t, http.StatusBadRequest, "a second rollback")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := encodeDoc(map[string]any{"v": v})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
