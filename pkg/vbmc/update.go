package vbmc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Update scripts a virtual BMC's UpdateService: how long an update task
// runs, when the new firmware shows, and the faults real BMCs have while
// they flash. The zero value is a healthy BMC whose tasks take 1 s and
// whose firmware takes effect at the next host boot.
//
// What a virtual BMC flashes is an image made by FirmwareImage: a small
// JSON document naming the FirmwareInventory entries (by Id or Name) it
// brings to which version. Anything else is refused by the task, as a real
// BMC refuses a foreign image.
type Update struct {
	// TaskTime is how long an update task runs on the BMC's clock
	// (Config.Now); default 1 s.
	TaskTime time.Duration
	// ApplyTime is when the new versions show, unless the image says:
	// "Immediate" (when the task ends), "OnReset" (the next host boot, the
	// default) or "ACCycle" (the next boot after the host was off).
	ApplyTime string
	// FailMessage makes every task end in Exception with this message
	// (MessageId Update.1.0.ApplyFailed) and change nothing.
	FailMessage string
	// RestartAfter > 0: the BMC restarts this long after a task starts,
	// as a BMC flashing its own firmware does: every session is dropped
	// and every connection is closed unanswered for RestartFor (default
	// 2 s); the task completes meanwhile.
	RestartAfter time.Duration
	RestartFor   time.Duration
	// ForgetTasks: the restart loses the task list (a GET of the task is
	// 404 afterwards), as BMCs that keep tasks in memory do.
	ForgetTasks bool
	// Unchanged: tasks complete, but no version ever changes (the image
	// "took" and the component ignored it).
	Unchanged bool
	// MaxUpdates refuses a start (SimpleUpdate or a push) with 503 while
	// this many tasks run, as BMCs short of memory for images do; 0: no
	// limit.
	MaxUpdates int
	// Multipart offers a MultipartHttpPushUri where the mockup has none.
	Multipart bool
	// NoSimpleUpdate hides the SimpleUpdate action (to test the pushes).
	NoSimpleUpdate bool
}

func (u Update) check() error {
	if u.TaskTime < 0 || u.RestartAfter < 0 || u.RestartFor < 0 || u.MaxUpdates < 0 {
		return fmt.Errorf("update script %+v: expected durations and MaxUpdates >= 0", u)
	}
	switch u.ApplyTime {
	case "", "Immediate", "OnReset", "ACCycle":
		return nil
	}
	return fmt.Errorf("update script ApplyTime %q: expected Immediate, OnReset or ACCycle", u.ApplyTime)
}

// imageDoc is the virtual BMC's firmware image format.
type imageDoc struct {
	Firmware struct {
		Versions  map[string]string `json:"versions"`             // FirmwareInventory Id or Name -> version
		ApplyTime string            `json:"apply_time,omitempty"` // Immediate, OnReset, ACCycle
	} `json:"vbmc-firmware"`
}

// FirmwareImage makes an image a virtual BMC flashes: versions maps
// FirmwareInventory entries, by Id or Name (case does not matter: "BMC",
// "NVIDIA A40" names four GPUs at once), to the version they get;
// applyTime is "" (the BMC's Update.ApplyTime), Immediate, OnReset or
// ACCycle.
func FirmwareImage(versions map[string]string, applyTime string) []byte {
	var d imageDoc
	d.Firmware.Versions, d.Firmware.ApplyTime = versions, applyTime
	b, _ := json.Marshal(d)
	return b
}

func parseImage(b []byte) (imageDoc, error) {
	var d imageDoc
	if err := json.Unmarshal(b, &d); err != nil || len(d.Firmware.Versions) == 0 {
		return d, fmt.Errorf("the image (%d bytes) is not a firmware image for this BMC", len(b))
	}
	return d, nil
}

// vtask is one update the BMC runs.
type vtask struct {
	id        int
	start     time.Time
	items     map[string]string // FirmwareInventory path -> version it brings
	applyTime string
	digest    string // sha256 of the image
	state     string // Running, Completed, Exception
	message   message
	payload   string // the path the start was POSTed to
	body      string // the start's JSON body (SimpleUpdate), for Payload.JsonBody
}

// updateState is a BMC's UpdateService state. b.mu guards it.
type updateState struct {
	tasks        []*vtask
	staged       map[string]staged // FirmwareInventory path -> version waiting for a reset
	previous     map[string]string // path -> the version before the last flash (rollback)
	flashes      map[string]int    // path -> flashes that took effect
	starts       int               // update starts accepted
	refused      int               // starts refused for MaxUpdates
	restartFrom  time.Time
	restartUntil time.Time
	dropped      bool     // the restart has dropped the sessions
	sawOff       bool     // the host was off since the last boot (for ACCycle)
	captured     []string // the mockup's own tasks, kept listed
	firstID      int      // this BMC's tasks are numbered from here (after the captured ones)
}

type staged struct {
	version, applyTime, digest string
}

func (u *updateState) init() {
	if u.staged == nil {
		u.staged, u.previous, u.flashes = map[string]staged{}, map[string]string{}, map[string]int{}
	}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// UpdateStats says what the UpdateService did, for tests.
type UpdateStats struct {
	Starts  int            // updates accepted (SimpleUpdate and pushes)
	Refused int            // starts refused with 503 (MaxUpdates)
	Running int            // tasks running now
	Flashes map[string]int // FirmwareInventory path -> flashes that took effect
}

// UpdateStats returns the UpdateService's counters.
func (b *BMC) UpdateStats() UpdateStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceUpdates()
	st := UpdateStats{Starts: b.upd.starts, Refused: b.upd.refused, Flashes: map[string]int{}}
	for k, v := range b.upd.flashes {
		st.Flashes[k] = v
	}
	for _, t := range b.upd.tasks {
		if t.state == "Running" {
			st.Running++
		}
	}
	return st
}

// FirmwareVersion returns the version the FirmwareInventory entry at path
// shows now.
func (b *BMC) FirmwareVersion(path string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceUpdates()
	doc, _ := b.peek(cleanPath(path))
	return str(doc["Version"])
}

// matchItems maps an image's versions onto FirmwareInventory paths: each
// key names entries by Id or Name, case aside. targets, when given, limit
// the update to those entries, and each must be one the image brings.
func (b *BMC) matchItems(img imageDoc, targets []string) (map[string]string, error) {
	inv, _ := b.peek(serviceRoot + "/UpdateService/FirmwareInventory")
	out := map[string]string{}
	for _, p := range members(inv) {
		doc, _ := b.peek(p)
		for k, v := range img.Firmware.Versions {
			if strings.EqualFold(k, str(doc["Id"])) || strings.EqualFold(k, str(doc["Name"])) {
				out[p] = v
			}
		}
	}
	if len(targets) == 0 {
		if len(out) == 0 {
			return nil, fmt.Errorf("the image brings none of this BMC's firmware (it names %v)", keys(img.Firmware.Versions))
		}
		return out, nil
	}
	only := map[string]string{}
	for _, t := range targets {
		v, ok := out[cleanPath(t)]
		if !ok {
			return nil, fmt.Errorf("the image does not apply to target %s", t)
		}
		only[cleanPath(t)] = v
	}
	return only, nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
