package firmware_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// memImages keeps packages in memory and serves them on loopback, as the
// engine serves them from the content store.
type memImages struct {
	mu    sync.Mutex
	pkgs  map[string][]byte
	base  string // "" : no URL (push only)
	fetch int
}

func newImages(t testing.TB, withURL bool, pkgs ...[]byte) (*memImages, []string) {
	t.Helper()
	m := &memImages{pkgs: map[string][]byte{}}
	var shas []string
	for _, p := range pkgs {
		s := sha256.Sum256(p)
		sha := hex.EncodeToString(s[:])
		m.pkgs[sha] = p
		shas = append(shas, sha)
	}
	if withURL {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.mu.Lock()
			b, ok := m.pkgs[strings.TrimPrefix(r.URL.Path, "/p/")]
			m.fetch++
			m.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(b)
		}))
		t.Cleanup(srv.Close)
		m.base = srv.URL
	}
	return m, shas
}

func (m *memImages) URL(_ context.Context, sha string) (string, error) {
	if m.base == "" {
		return "", nil
	}
	return m.base + "/p/" + sha, nil
}

func (m *memImages) Open(_ context.Context, sha string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.pkgs[sha]
	if !ok {
		return nil, errors.New("no such package")
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// saved records every step Apply persists.
type saved struct {
	mu     sync.Mutex
	steps  []firmware.Step
	onSave func(firmware.Step)
}

func (s *saved) save(_ context.Context, st firmware.Step) error {
	s.mu.Lock()
	s.steps = append(s.steps, st)
	f := s.onSave
	s.mu.Unlock()
	if f != nil {
		f(st)
	}
	return nil
}

func (s *saved) phases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, st := range s.steps {
		if len(out) == 0 || out[len(out)-1] != string(st.Phase) {
			out = append(out, string(st.Phase))
		}
	}
	return out
}

func (s *saved) last() firmware.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps[len(s.steps)-1]
}

const bmcTarget = "/redfish/v1/UpdateService/FirmwareInventory/BMC"

var fastOptions = firmware.Options{Timeout: 20 * time.Second, Poll: 20 * time.Millisecond}

// bmcStep is a step that brings the DMTF mockup's BMC firmware to v.
func bmcStep(sha, v, applyTime string) firmware.Step {
	return firmware.Step{Package: sha, Targets: []string{bmcTarget}, Want: map[string]string{bmcTarget: v}, ApplyTime: applyTime}
}

// TestApplySuccess: each way of starting an update brings the BMC to the
// pin, through the phases in order, flashing once.
func TestApplySuccess(t *testing.T) {
	img := vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, "")
	for name, tc := range map[string]struct {
		update  vbmc.Update
		withURL bool
		method  string
		apply   string
	}{
		"simple update, on reset":    {vbmc.Update{TaskTime: 200 * time.Millisecond}, true, bmc.MethodSimpleUpdate, "on-reset"},
		"multipart push, ac cycle":   {vbmc.Update{TaskTime: 200 * time.Millisecond, Multipart: true, ApplyTime: "ACCycle"}, false, bmc.MethodMultipartPush, "ac-cycle"},
		"http push, immediate":       {vbmc.Update{TaskTime: 100 * time.Millisecond, NoSimpleUpdate: true, ApplyTime: "Immediate"}, false, bmc.MethodHTTPPush, "immediate"},
		"simple update preferred":    {vbmc.Update{TaskTime: 100 * time.Millisecond, Multipart: true}, true, bmc.MethodSimpleUpdate, "on-reset"},
		"push when no URL is served": {vbmc.Update{TaskTime: 100 * time.Millisecond, Multipart: true}, false, bmc.MethodMultipartPush, "on-reset"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, url := startBMC(t, "dmtf-public-rackmount1", func(c *vbmc.Config) { c.Update = tc.update })
			imgs, shas := newImages(t, tc.withURL, img)
			var rec saved
			st, err := firmware.Apply(ctxT(t), dial(t, url), imgs, bmcStep(shas[0], "1.46.0", tc.apply), fastOptions, rec.save)
			if err != nil {
				t.Fatalf("Apply: %v (step %+v)", err, st)
			}
			if st.Phase != firmware.PhaseDone || st.Method != tc.method || b.FirmwareVersion(bmcTarget) != "1.46.0" {
				t.Errorf("step %+v, BMC version %s; want done by %s at 1.46.0", st, b.FirmwareVersion(bmcTarget), tc.method)
			}
			want := "starting running reset verify done"
			if st.ResetSent != (tc.apply != "immediate") {
				t.Errorf("reset sent %v with apply time %s", st.ResetSent, tc.apply)
			}
			if got := strings.Join(rec.phases(), " "); !strings.HasSuffix(got, want) {
				t.Errorf("phases saved %q, want ... %q", got, want)
			}
			if s := b.UpdateStats(); s.Starts != 1 || s.Flashes[bmcTarget] != 1 {
				t.Errorf("BMC stats %+v: want one start, one flash", s)
			}
		})
	}
}

// TestApplyFaults: each scripted fault of the virtual BMC ends as it must.
func TestApplyFaults(t *testing.T) {
	img := vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, "")
	for name, tc := range map[string]struct {
		update vbmc.Update
		check  func(t *testing.T, b *vbmc.BMC, c *bmc.Client, st firmware.Step, err error)
	}{
		"task fails with the BMC's message": {vbmc.Update{TaskTime: 100 * time.Millisecond, FailMessage: "Flash write error at 0x4000"},
			func(t *testing.T, b *vbmc.BMC, _ *bmc.Client, st firmware.Step, err error) {
				if st.Phase != firmware.PhaseFailed || !strings.Contains(st.Message, "Flash write error at 0x4000") || err == nil {
					t.Errorf("step %+v, err %v: want failed with the BMC's message", st, err)
				}
			}},
		"BMC restarts mid-update": {vbmc.Update{TaskTime: 600 * time.Millisecond, RestartAfter: 100 * time.Millisecond,
			RestartFor: 400 * time.Millisecond, ForgetTasks: true},
			func(t *testing.T, b *vbmc.BMC, c *bmc.Client, st firmware.Step, err error) {
				if err != nil || st.Phase != firmware.PhaseDone || st.Waits == 0 {
					t.Errorf("step %+v, err %v: want done after waiting for the BMC", st, err)
				}
				if c.Renewals() == 0 {
					t.Error("the client never logged in again after the BMC dropped its sessions")
				}
				if s := b.UpdateStats(); s.Starts != 1 {
					t.Errorf("%d starts, want 1", s.Starts)
				}
			}},
		"version unchanged after reset": {vbmc.Update{TaskTime: 100 * time.Millisecond, Unchanged: true},
			func(t *testing.T, b *vbmc.BMC, _ *bmc.Client, st firmware.Step, err error) {
				if st.Phase != firmware.PhaseFailed || !strings.Contains(st.Message, `reads "1.45.455b66-rev4"`) || !st.ResetSent {
					t.Errorf("step %+v: want failed, the version read after the reset named", st)
				}
			}},
		"too many updates at once (503)": {vbmc.Update{TaskTime: 300 * time.Millisecond, MaxUpdates: 1},
			func(t *testing.T, b *vbmc.BMC, _ *bmc.Client, st firmware.Step, err error) {
				if err != nil || st.Phase != firmware.PhaseDone || b.UpdateStats().Refused == 0 {
					t.Errorf("step %+v, err %v, stats %+v: want done after the 503s", st, err, b.UpdateStats())
				}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, url := startBMC(t, "dmtf-public-rackmount1", func(c *vbmc.Config) { c.Update = tc.update })
			imgs, shas := newImages(t, true, img)
			c := dial(t, url)
			o := fastOptions
			o.Timeout = 3 * time.Second
			if tc.update.MaxUpdates > 0 {
				other, osha := newImages(t, true, vbmc.FirmwareImage(map[string]string{"BIOS": "P79 v1.46"}, ""))
				us, _ := c.UpdateService(ctxT(t))
				u, _ := other.URL(ctxT(t), osha[0])
				if _, err := c.StartUpdate(ctxT(t), us, bmc.UpdateRequest{ImageURI: u}); err != nil {
					t.Fatal(err)
				}
			}
			st, err := firmware.Apply(ctxT(t), c, imgs, bmcStep(shas[0], "1.46.0", "on-reset"), o, nil)
			tc.check(t, b, c, st, err)
		})
	}
}

// TestApplyResumeNeverFlashesTwice: ingot stops (its context ends) at each
// phase after the start, and a new Apply resumes from the persisted step:
// the BMC sees one start and one flash, and the node reaches its pin.
func TestApplyResumeNeverFlashesTwice(t *testing.T) {
	img := vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, "")
	for _, stopAt := range []firmware.Phase{firmware.PhaseStarting, firmware.PhaseRunning, firmware.PhaseReset, firmware.PhaseVerify} {
		t.Run(string(stopAt), func(t *testing.T) {
			t.Parallel()
			b, url := startBMC(t, "dmtf-public-rackmount1", func(c *vbmc.Config) { c.Update = vbmc.Update{TaskTime: 300 * time.Millisecond} })
			imgs, shas := newImages(t, true, img)
			c := dial(t, url)
			ctx, cancel := context.WithCancel(ctxT(t))
			var rec saved
			rec.onSave = func(s firmware.Step) {
				if s.Phase == stopAt {
					cancel()
				}
			}
			st, err := firmware.Apply(ctx, c, imgs, bmcStep(shas[0], "1.46.0", "on-reset"), fastOptions, rec.save)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("first Apply: %v (step %+v); want it stopped", err, st)
			}
			resumeFrom := rec.last()
			if stopAt == firmware.PhaseStarting {
				// The worst moment: the start was persisted, then sent,
				// and ingot stopped before it saved the answer.
				resumeFrom = firstWith(&rec, firmware.PhaseStarting)
			}
			c2 := dial(t, url) // a new ingot, a new client
			st, err = firmware.Apply(ctxT(t), c2, imgs, resumeFrom, fastOptions, nil)
			if err != nil || st.Phase != firmware.PhaseDone {
				t.Fatalf("resumed Apply from %s: %v (step %+v)", resumeFrom.Phase, err, st)
			}
			if s := b.UpdateStats(); s.Starts != 1 || s.Flashes[bmcTarget] != 1 {
				t.Errorf("BMC stats %+v after resuming from %s: want exactly one start and one flash", s, resumeFrom.Phase)
			}
		})
	}
}

func firstWith(s *saved, p firmware.Phase) firmware.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.steps {
		if st.Phase == p {
			return st
		}
	}
	return firmware.Step{}
}

// TestApplyRollback: the wrong image (it brings 1.46.0, the pin says
// 1.47.0) flashes, verify fails, and Rollback restores the version
// before.
func TestApplyRollback(t *testing.T) {
	b, url := startBMC(t, "dmtf-public-rackmount1", func(c *vbmc.Config) {
		c.Update = vbmc.Update{TaskTime: 100 * time.Millisecond, ApplyTime: "Immediate"}
	})
	imgs, shas := newImages(t, true, vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, ""))
	o := fastOptions
	o.Timeout, o.Rollback = time.Second, true
	st, err := firmware.Apply(ctxT(t), dial(t, url), imgs, bmcStep(shas[0], "1.47.0", "immediate"), o, nil)
	if err == nil || st.Phase != firmware.PhaseRolledBack || !strings.Contains(st.Message, `reads "1.46.0"`) {
		t.Errorf("step %+v, err %v: want rolled back after reading 1.46.0", st, err)
	}
	if v := b.FirmwareVersion(bmcTarget); v != "1.45.455b66-rev4" {
		t.Errorf("version after the rollback %s, want the one before (1.45.455b66-rev4)", v)
	}
}

// TestApplyRefusesBadPackage: a package whose content is not its sha256 is
// never sent; targets already at the pin are not flashed.
func TestApplyRefusesBadPackage(t *testing.T) {
	b, url := startBMC(t, "dmtf-public-rackmount1", nil)
	imgs, shas := newImages(t, true, vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, ""))
	imgs.pkgs[shas[0]] = []byte("tampered")
	c := dial(t, url)
	st, err := firmware.Apply(ctxT(t), c, imgs, bmcStep(shas[0], "1.46.0", "on-reset"), fastOptions, nil)
	if err == nil || !strings.Contains(st.Message, "refusing to flash it") {
		t.Errorf("a tampered package: %+v, %v", st, err)
	}
	st, err = firmware.Apply(ctxT(t), c, imgs, bmcStep(shas[0], "1.45.455b66-rev4", "on-reset"), fastOptions, nil)
	if err == nil { // the tampered package is still refused before anything is read
		t.Errorf("tampered package at the pin: %+v", st)
	}
	good, gshas := newImages(t, true, vbmc.FirmwareImage(map[string]string{"BMC": "1.45"}, ""))
	st, err = firmware.Apply(ctxT(t), c, good, bmcStep(gshas[0], "1.45.455b66-rev4", "on-reset"), fastOptions, nil)
	if err != nil || st.Phase != firmware.PhaseDone || b.UpdateStats().Starts != 0 {
		t.Errorf("at the pin already: %+v, %v, %+v; want done with no start", st, err, b.UpdateStats())
	}
}
