package vbmc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	updateServicePath = serviceRoot + "/UpdateService"
	taskServicePath   = serviceRoot + "/TaskService"
	tasksPath         = taskServicePath + "/Tasks"
	multipartPath     = updateServicePath + "/upload"
	rollbackAction    = "#VirtualBMC.Rollback"
	rollbackPath      = updateServicePath + "/Actions/Oem/VirtualBMC.Rollback"
	maxImage          = 64 << 20
)

// updatePaths are where the UpdateService takes requests ("" none).
type updatePaths struct {
	simple, push, multipart string
}

// initUpdate shapes the mockup's UpdateService to the script: the
// multipart push and the rollback action added, SimpleUpdate hidden; and
// makes a TaskService where the mockup has none. b.mu not needed (New).
func (b *BMC) initUpdate() {
	b.upd.init()
	doc, ok := b.mutable(updateServicePath)
	if !ok {
		return
	}
	acts, _ := doc["Actions"].(map[string]any)
	if acts == nil {
		acts = map[string]any{}
		doc["Actions"] = acts
	}
	if su, ok := acts["#UpdateService.SimpleUpdate"].(map[string]any); ok {
		b.paths.simple = cleanPath(str(su["target"]))
		if b.cfg.Update.NoSimpleUpdate {
			delete(acts, "#UpdateService.SimpleUpdate")
			b.paths.simple = ""
		}
	}
	b.paths.push = cleanPath(str(doc["HttpPushUri"]))
	if b.cfg.Update.Multipart && doc["MultipartHttpPushUri"] == nil {
		doc["MultipartHttpPushUri"] = multipartPath
	}
	b.paths.multipart = cleanPath(str(doc["MultipartHttpPushUri"]))
	oem, _ := acts["Oem"].(map[string]any)
	if oem == nil {
		oem = map[string]any{}
		acts["Oem"] = oem
	}
	oem[rollbackAction] = map[string]any{"target": rollbackPath}
	b.touch(updateServicePath)
	b.upd.firstID = 1
	if coll, ok := b.peek(tasksPath); ok {
		b.upd.captured = members(coll)
		for _, m := range b.upd.captured {
			if n, err := strconv.Atoi(m[strings.LastIndex(m, "/")+1:]); err == nil && n >= b.upd.firstID {
				b.upd.firstID = n + 1
			}
		}
	} else {
		b.put(taskServicePath, map[string]any{"@odata.id": taskServicePath, "@odata.type": "#TaskService.v1_2_0.TaskService",
			"Id": "TaskService", "Name": "Task Service", "ServiceEnabled": true, "Tasks": map[string]any{"@odata.id": tasksPath}})
		b.put(tasksPath, map[string]any{"@odata.id": tasksPath, "@odata.type": "#TaskCollection.TaskCollection",
			"Name": "Task Collection", "Members": []any{}, "Members@odata.count": json.Number("0")})
		if root, ok := b.mutable(serviceRoot); ok {
			root["Tasks"] = map[string]any{"@odata.id": taskServicePath}
			b.touch(serviceRoot)
		}
	}
}

// isUpdatePost reports a POST the UpdateService answers.
func (b *BMC) isUpdatePost(p string) bool {
	return p != "" && (p == b.paths.simple || p == b.paths.push || p == b.paths.multipart || p == rollbackPath)
}

// postUpdate starts an update (SimpleUpdate, a push) or a rollback.
func (b *BMC) postUpdate(w http.ResponseWriter, r *http.Request, p string) {
	if p == rollbackPath {
		b.rollback(w, r)
		return
	}
	img, targets, applyTime, body, msg := b.readUpdate(r, p)
	if msg != nil {
		writeError(w, http.StatusBadRequest, *msg)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceUpdates()
	if lim := b.cfg.Update.MaxUpdates; lim > 0 && b.running() >= lim {
		b.upd.refused++
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, message{"Base.1.0.ServiceTemporarilyUnavailable",
			fmt.Sprintf("An update is in progress (%d running): the BMC has no room for another image. Retry in 1 seconds.", lim),
			[]string{"1"}, "Critical", "Wait for the running update to finish."})
		return
	}
	t := b.newTask(img, targets, applyTime, p)
	t.body = body
	b.syncTasks()
	out, _ := encodeDoc(b.taskDoc(t))
	w.Header().Set("Location", fmt.Sprintf("%s/%d/Monitor", tasksPath, t.id))
	writeJSON(w, http.StatusAccepted, out, "")
}

// readUpdate reads what a start asks for: the image (fetched from an
// ImageURI, or pushed), the targets and the apply time.
func (b *BMC) readUpdate(r *http.Request, p string) (img []byte, targets []string, applyTime, raw string, msg *message) {
	switch p {
	case b.paths.simple:
		body, err := readBody(r)
		if err != nil {
			return nil, nil, "", "", ptr(msgMalformed(err))
		}
		enc, _ := encodeDoc(body)
		raw = strings.TrimSpace(string(enc))
		uri, _ := body["ImageURI"].(string)
		if uri == "" {
			return nil, nil, "", "", ptr(msgMissingParam("ImageURI", "UpdateService.SimpleUpdate"))
		}
		if proto, ok := body["TransferProtocol"].(string); ok && !strings.HasPrefix(strings.ToLower(uri), strings.ToLower(proto)+"://") {
			return nil, nil, "", "", ptr(msgValueNotInList(proto, "TransferProtocol", []string{strings.ToUpper(strings.SplitN(uri, ":", 2)[0])}))
		}
		img, err := fetchImage(r.Context(), uri)
		if err != nil {
			return nil, nil, "", "", &message{"Update.1.0.TransferFailed", fmt.Sprintf("Transfer of image %s failed: %v.", uri, err),
				[]string{uri}, "Critical", "Check that the image URI is reachable from the BMC."}
		}
		return img, stringList(body["Targets"]), str(body["@Redfish.OperationApplyTime"]), raw, nil
	case b.paths.multipart:
		img, targets, applyTime, msg := readMultipart(r)
		return img, targets, applyTime, "", msg
	}
	img, err := io.ReadAll(io.LimitReader(r.Body, maxImage))
	if err != nil {
		return nil, nil, "", "", ptr(msgMalformed(err))
	}
	b.mu.Lock()
	doc, _ := b.peek(updateServicePath)
	b.mu.Unlock()
	return img, stringList(doc["HttpPushUriTargets"]), "", "", nil
}

// patchUpdateService sets HttpPushUriTargets (the targets of the next
// plain push) and HttpPushUriTargetsBusy. b.mu held.
func (b *BMC) patchUpdateService(p string, body map[string]any) (int, *message) {
	for k, v := range body {
		switch k {
		case "HttpPushUriTargets":
			if _, ok := v.([]any); !ok {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
		case "HttpPushUriTargetsBusy":
			if _, ok := v.(bool); !ok {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
		default:
			return http.StatusBadRequest, ptr(msgPropertyNotWritable(k))
		}
	}
	doc, _ := b.mutable(p)
	for k, v := range body {
		doc[k] = v
	}
	b.touch(p)
	return 0, nil
}

// fetchImage GETs an ImageURI, as a BMC does for SimpleUpdate.
func fetchImage(ctx context.Context, uri string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxImage))
}

// readMultipart reads a Redfish multipart push: UpdateParameters (JSON)
// and UpdateFile.
func readMultipart(r *http.Request) ([]byte, []string, string, *message) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, nil, "", ptr(msgMalformed(fmt.Errorf("expected multipart/form-data: %v", err)))
	}
	mr := multipart.NewReader(io.LimitReader(r.Body, maxImage+1<<20), params["boundary"])
	var img []byte
	var up struct {
		Targets   []string `json:"Targets"`
		ApplyTime string   `json:"@Redfish.OperationApplyTime"`
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, "", ptr(msgMalformed(err))
		}
		data, err := io.ReadAll(io.LimitReader(part, maxImage))
		if err != nil {
			return nil, nil, "", ptr(msgMalformed(err))
		}
		switch part.FormName() {
		case "UpdateParameters":
			if err := json.Unmarshal(data, &up); err != nil {
				return nil, nil, "", ptr(msgMalformed(err))
			}
		case "UpdateFile":
			img = data
		}
	}
	if img == nil {
		return nil, nil, "", ptr(msgMissingParam("UpdateFile", "multipart HTTP push update"))
	}
	return img, up.Targets, up.ApplyTime, nil
}

// newTask starts a task for img. b.mu held.
func (b *BMC) newTask(img []byte, targets []string, applyTime, payload string) *vtask {
	b.upd.starts++
	now := b.cfg.Now()
	t := &vtask{id: b.upd.firstID + len(b.upd.tasks), start: now, state: "Running", digest: digest(img), payload: payload}
	doc, err := parseImage(img)
	if err == nil {
		t.items, err = b.matchItems(doc, targets)
	}
	t.applyTime = cmp.Or(doc.Firmware.ApplyTime, applyTime, b.cfg.Update.ApplyTime, "OnReset")
	if err != nil {
		t.state, t.message = "Exception", message{"Update.1.0.ApplyFailed", "Update failed: " + err.Error() + ".", nil, "Critical", "Use an image made for this BMC."}
	}
	b.upd.tasks = append(b.upd.tasks, t)
	if u := b.cfg.Update; u.RestartAfter > 0 && t.state == "Running" {
		b.upd.restartFrom = now.Add(u.RestartAfter)
		b.upd.restartUntil = b.upd.restartFrom.Add(cmpDur(u.RestartFor, 2*time.Second))
		b.upd.dropped = false
	}
	return t
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// running counts running tasks. b.mu held.
func (b *BMC) running() int {
	n := 0
	for _, t := range b.upd.tasks {
		if t.state == "Running" {
			n++
		}
	}
	return n
}

// advanceUpdates brings the tasks up to the BMC's clock: a task whose
// time has come completes (or fails, as scripted), its versions staged or
// applied. b.mu held.
func (b *BMC) advanceUpdates() {
	now := b.cfg.Now()
	taskTime := cmpDur(b.cfg.Update.TaskTime, time.Second)
	restart := b.restarting() && !b.upd.dropped
	changed := false
	for _, t := range b.upd.tasks {
		// A restart finishes the flash it interrupts.
		if t.state == "Running" && (restart || !now.Before(t.start.Add(taskTime))) {
			b.finish(t)
			changed = true
		}
	}
	if restart {
		b.upd.dropped = true
		for _, s := range b.sessions {
			b.dropSession(s)
		}
		if b.cfg.Update.ForgetTasks {
			for _, t := range b.upd.tasks {
				b.put(fmt.Sprintf("%s/%d", tasksPath, t.id), nil)
			}
			b.upd.tasks = nil
		}
		changed = true
	}
	if changed {
		b.syncTasks()
	}
}

// finish ends a running task: failed as scripted, or completed with its
// versions staged (applied at once for Immediate). b.mu held.
func (b *BMC) finish(t *vtask) {
	if msg := b.cfg.Update.FailMessage; msg != "" {
		t.state, t.message = "Exception", message{"Update.1.0.ApplyFailed", msg, nil, "Critical", "Contact the vendor."}
		return
	}
	t.state = "Completed"
	t.message = message{"Update.1.0.UpdateSuccessful", "The update completed successfully.", nil, "OK", "None."}
	for p, v := range t.items {
		b.upd.staged[p] = staged{version: v, applyTime: t.applyTime, digest: t.digest}
	}
	if t.applyTime == "Immediate" {
		b.applyStaged("Immediate")
	}
}

// restarting reports the scripted BMC restart window. b.mu held.
func (b *BMC) restarting() bool {
	now := b.cfg.Now()
	return !b.upd.restartFrom.IsZero() && !now.Before(b.upd.restartFrom) && now.Before(b.upd.restartUntil)
}

// applyStaged makes staged versions with one of the apply times take
// effect. b.mu held.
func (b *BMC) applyStaged(times ...string) {
	for p, s := range b.upd.staged {
		if !slices.Contains(times, s.applyTime) {
			continue
		}
		delete(b.upd.staged, p)
		if b.cfg.Update.Unchanged {
			continue
		}
		doc, ok := b.mutable(p)
		if !ok {
			continue
		}
		b.upd.previous[p] = str(doc["Version"])
		b.setVersion(p, doc, s.version, s.digest)
		b.upd.flashes[p]++
		b.event("FirmwareUpdated", "Version Change", "Firmware %s is now version %s.", str(doc["Name"]), s.version)
	}
}

// setVersion changes a FirmwareInventory entry's version (and the
// System's BiosVersion or the Manager's FirmwareVersion it relates to).
func (b *BMC) setVersion(p string, doc map[string]any, version, sum string) {
	doc["Version"] = version
	if sum != "" {
		doc["Measurement"] = map[string]any{"Measurement": sum, "MeasurementHashAlgorithm": "TPM_ALG_SHA256"}
	}
	b.touch(p)
	for _, rel := range objects(doc["RelatedItem"]) {
		r := cleanPath(str(rel["@odata.id"]))
		rd, ok := b.mutable(r)
		switch {
		case !ok:
		case typeIs(rd, "ComputerSystem"):
			rd["BiosVersion"] = version
			b.touch(r)
		case typeIs(rd, "Manager"):
			rd["FirmwareVersion"] = version
			b.touch(r)
		}
	}
}

// firmwarePower applies staged firmware at a host boot: OnReset at every
// boot, ACCycle at a boot after the host was off. b.mu held.
func (b *BMC) firmwarePower(tr transition) {
	if tr.off {
		b.upd.sawOff = true
	}
	if !tr.boot {
		return
	}
	if b.upd.sawOff || tr.off {
		b.applyStaged("OnReset", "ACCycle")
	} else {
		b.applyStaged("OnReset")
	}
	b.upd.sawOff = false
}

// rollback restores the previous versions of the targets.
func (b *BMC) rollback(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, msgMalformed(err))
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceUpdates()
	targets := stringList(body["Targets"])
	for _, t := range targets {
		if _, ok := b.upd.previous[cleanPath(t)]; !ok {
			writeError(w, http.StatusBadRequest, message{"Update.1.0.ApplyFailed",
				fmt.Sprintf("There is no previous image of %s to roll back to.", t), []string{t}, "Critical", "None."})
			return
		}
	}
	for _, t := range targets {
		p := cleanPath(t)
		doc, _ := b.mutable(p)
		prev := b.upd.previous[p]
		delete(b.upd.previous, p)
		b.setVersion(p, doc, prev, "")
		delete(doc, "Measurement")
		b.event("FirmwareRolledBack", "Version Change", "Firmware %s rolled back to version %s.", str(doc["Name"]), prev)
	}
	w.WriteHeader(http.StatusNoContent)
}

// taskDoc renders a task.
func (b *BMC) taskDoc(t *vtask) map[string]any {
	p := fmt.Sprintf("%s/%d", tasksPath, t.id)
	pct := 100
	if t.state == "Running" {
		el := b.cfg.Now().Sub(t.start)
		pct = int(100 * el / cmpDur(b.cfg.Update.TaskTime, time.Second))
	}
	status := map[string]string{"Running": "OK", "Completed": "OK", "Exception": "Critical"}[t.state]
	m := errorBody(t.message)["error"].(map[string]any)["@Message.ExtendedInfo"]
	if t.message.ID == "" {
		m = []any{}
	}
	return map[string]any{"@odata.id": p, "@odata.type": "#Task.v1_7_0.Task", "Id": strconv.Itoa(t.id), "Name": "Firmware update",
		"TaskState": t.state, "TaskStatus": status, "PercentComplete": json.Number(strconv.Itoa(min(pct, 100))),
		"StartTime": t.start.UTC().Format(time.RFC3339), "TaskMonitor": p + "/Monitor", "Messages": m,
		"Payload": map[string]any{"TargetUri": t.payload, "HttpOperation": "POST", "JsonBody": t.body}}
}

// syncTasks rewrites the task resources and their collection. b.mu held.
func (b *BMC) syncTasks() {
	var ms []any
	for _, c := range b.upd.captured {
		ms = append(ms, map[string]any{"@odata.id": c})
	}
	for _, t := range b.upd.tasks {
		p := fmt.Sprintf("%s/%d", tasksPath, t.id)
		b.put(p, b.taskDoc(t))
		ms = append(ms, map[string]any{"@odata.id": p})
	}
	if coll, ok := b.mutable(tasksPath); ok {
		coll["Members"] = append([]any{}, ms...)
		coll["Members@odata.count"] = json.Number(strconv.Itoa(len(ms)))
		b.touch(tasksPath)
	}
}

// monitor answers a task monitor: 202 and the Task while it runs, 200 and
// the Task once it has ended; 404 for a task the BMC does not know.
func (b *BMC) monitor(w http.ResponseWriter, p string) bool {
	rest, ok := strings.CutPrefix(p, tasksPath+"/")
	id, tail, _ := strings.Cut(rest, "/")
	if !ok || tail != "Monitor" {
		return false
	}
	n, _ := strconv.Atoi(id)
	b.mu.Lock()
	b.advanceUpdates()
	var t *vtask
	for _, x := range b.upd.tasks {
		if x.id == n {
			t = x
		}
	}
	if t == nil {
		b.mu.Unlock()
		writeError(w, http.StatusNotFound, msgMissing(p))
		return true
	}
	out, _ := encodeDoc(b.taskDoc(t))
	running := t.state == "Running"
	b.mu.Unlock()
	if running {
		w.Header().Set("Location", p)
		writeJSON(w, http.StatusAccepted, out, "")
		return true
	}
	writeJSON(w, http.StatusOK, out, "")
	return true
}
