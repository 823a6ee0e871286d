package vbmc

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Log services. A BMC keeps an event log (SEL) of what happened to the
// host, and OpenBMC also keeps the host's serial console (its HostLogger
// service). The captured mockups had their LogServices dropped
// (testdata/redfish-mockups/README.md), so this BMC makes its own:
//
//	MANAGER/LogServices                 LogServiceCollection (the mockup's members too, where it has one)
//	MANAGER/LogServices/SEL             LogService, LogEntryType SEL, as iDRAC's Sel
//	MANAGER/LogServices/SEL/Entries     LogEntryCollection, oldest first, 50 a page ($skip, $top)
//	SYSTEM/LogServices/HostLogger       OpenBMC's serial console service, where Config.Console is set
//	SYSTEM/LogServices/HostLogger/Entries  one entry (EntryType Oem) a console line, 1000 a page
//
// MANAGER is the first Manager (the first System where the mockup has
// none), SYSTEM the System the Backend drives (else the first). A Manager
// or System without a LogServices link gets one. The SEL records resets,
// boot overrides set and used, and BIOS settings applied, on the BMC's
// clock, plus what a test adds (AddLogEntry, Step.Log).

// Sizes of the log services.
const (
	selCapacity     = 1024    // entries the SEL keeps; the oldest go first (WrapsWhenFull)
	selPage         = 50      // SEL entries a page, as iDRAC pages its Sel
	consolePage     = 1000    // console lines a page, bmcweb's HostLogger default
	consoleMaxBytes = 4 << 20 // the tail of the console file served
)

// LogEntry is one entry of the virtual BMC's event log (SEL).
type LogEntry struct {
	// ID is the entry's Id, given by the BMC ("1", "2" ...); AddLogEntry
	// ignores it.
	ID string
	// Created is when the entry was made; zero: now on the BMC's clock
	// (for a Step's entries: when the step comes into force).
	Created time.Time
	// CreatedRaw, when set, is served as Created instead, as it is: a
	// BMC's malformed date ("1970-01-01T00:00:00", "not set") for testing
	// clients.
	CreatedRaw string
	// Severity is OK, Warning or Critical; "" serves OK.
	Severity   string
	Message    string
	MessageID  string
	SensorType string // Redfish LogEntry SensorType: "Fan", "Temperature", "PowerUnit" ...
	EntryCode  string // "Assert", "Deassert" ...; "" serves Assert
}

// logState is where the BMC's log services live and what its SEL holds.
// The paths are set once by initLogs; b.mu guards the rest.
type logState struct {
	selColl, selBase string // the LogServices collection holding the SEL, and the SEL
	conColl, conBase string // the same for the HostLogger ("" without Config.Console)
	sel              []LogEntry
	nextID           int
}

// initLogs places the log services (see the comment above). It runs in
// newBMC, before the BMC serves.
func (b *BMC) initLogs() {
	sys := b.powered
	if sys == "" && len(b.systems()) > 0 {
		sys = b.systems()[0]
	}
	owner := ""
	if coll, ok := b.peek(serviceRoot + "/Managers"); ok {
		for _, m := range members(coll) {
			if doc, ok := b.peek(m); ok && typeIs(doc, "Manager") {
				owner = m
				break
			}
		}
	}
	if owner == "" {
		owner = sys
	}
	if owner != "" {
		b.logs.selColl = b.logServicesOf(owner)
		b.logs.selBase = b.logs.selColl + "/SEL"
	}
	if b.cfg.Console != "" && sys != "" {
		b.logs.conColl = b.logServicesOf(sys)
		b.logs.conBase = b.logs.conColl + "/HostLogger"
	}
	b.logs.nextID = 1
}

// logServicesOf returns the LogServices collection of the resource at p,
// linking one where it has none.
func (b *BMC) logServicesOf(p string) string {
	doc, _ := b.peek(p)
	if l := linkOf(doc, "LogServices"); l != "" {
		return l
	}
	d, ok := b.mutable(p)
	if !ok {
		return p + "/LogServices"
	}
	d["LogServices"] = map[string]any{"@odata.id": p + "/LogServices"}
	b.touch(p)
	return p + "/LogServices"
}

// AddLogEntry appends e to the event log (SEL). A full log drops its
// oldest entry.
func (b *BMC) AddLogEntry(e LogEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushScriptLog()
	b.addLog(e)
}

// LogEntries returns the event log (SEL), oldest first.
func (b *BMC) LogEntries() []LogEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushScriptLog()
	return append([]LogEntry(nil), b.logs.sel...)
}

// addLog appends e, numbered and dated. b.mu held.
func (b *BMC) addLog(e LogEntry) {
	if b.logs.selBase == "" {
		return
	}
	if e.Created.IsZero() {
		e.Created = b.cfg.Now()
	}
	e.ID = strconv.Itoa(b.logs.nextID)
	b.logs.nextID++
	b.logs.sel = append(b.logs.sel, e)
	if n := len(b.logs.sel) - selCapacity; n > 0 {
		b.logs.sel = append([]LogEntry(nil), b.logs.sel[n:]...)
	}
}

// event records what the BMC did to the host. b.mu held.
func (b *BMC) event(id, sensor, format string, args ...any) {
	b.addLog(LogEntry{MessageID: "VBMC.1.0." + id, SensorType: sensor, Message: fmt.Sprintf(format, args...)})
}

// logReset records a reset: power off (or the shutdown asked of the
// guest), then power on. b.mu held.
func (b *BMC) logReset(resetType string, tr transition) {
	switch {
	case tr.off && tr.graceful:
		b.event("HostShutdownRequested", "PowerUnit", "The host was asked to shut down (ResetType %s).", resetType)
	case tr.off:
		b.event("HostPoweredOff", "PowerUnit", "The host was powered off (ResetType %s).", resetType)
	}
	if tr.boot {
		b.event("HostPoweredOn", "PowerUnit", "The host was powered on (ResetType %s).", resetType)
	}
	if resetType == "Nmi" {
		b.addLog(LogEntry{MessageID: "VBMC.1.0.DiagnosticInterrupt", SensorType: "Critical Interrupt", Severity: "Warning",
			Message: "A diagnostic interrupt (NMI) was sent to the host."})
	}
}

// flushScriptLog appends the Log of every scenario step that has come into
// force since the last flush. b.mu held.
func (b *BMC) flushScriptLog() {
	s := b.script
	if s == nil {
		return
	}
	i, _ := b.step()
	for ; s.logged <= i; s.logged++ {
		st := s.steps[s.logged]
		for _, e := range st.Log {
			if e.Created.IsZero() {
				e.Created = s.start.Add(st.At)
			}
			b.addLog(e)
		}
	}
}

// logDoc answers the log service resources: found is false for any other
// path. q holds the paging options ($skip, $top) of an entry collection; a
// bad one is a 400 message. b.mu held.
func (b *BMC) logDoc(p string, q url.Values) (doc map[string]any, found bool, bad *message) {
	l := &b.logs
	if p == "" || (p != l.selColl && p != l.conColl && !under(p, l.selBase) && !under(p, l.conBase)) {
		return nil, false, nil
	}
	b.flushScriptLog()
	switch {
	case p == l.selColl || p == l.conColl:
		return b.logServices(p), true, nil
	case p == l.selBase:
		return logService(p, "SEL", "System Event Log", "SEL", b.cfg.Now()), true, nil
	case p == l.conBase:
		return logService(p, "HostLogger", "Host Logger Service", "", b.cfg.Now()), true, nil
	case p == l.selBase+"/Entries":
		skip, top, bad := paging(q, selPage)
		if bad != nil {
			return nil, false, bad
		}
		return entryCollection(p, len(l.sel), skip, top, func(i int) map[string]any { return selEntry(p, l.sel[i]) }), true, nil
	case p == l.conBase+"/Entries":
		skip, top, bad := paging(q, consolePage)
		if bad != nil {
			return nil, false, bad
		}
		lines := b.consoleLines()
		return entryCollection(p, len(lines), skip, top, func(i int) map[string]any { return consoleEntry(p, i, lines[i]) }), true, nil
	case strings.HasPrefix(p, l.selBase+"/Entries/"):
		id := strings.TrimPrefix(p, l.selBase+"/Entries/")
		for _, e := range l.sel {
			if e.ID == id {
				return selEntry(l.selBase+"/Entries", e), true, nil
			}
		}
	case strings.HasPrefix(p, l.conBase+"/Entries/"):
		n, err := strconv.Atoi(strings.TrimPrefix(p, l.conBase+"/Entries/"))
		if lines := b.consoleLines(); err == nil && n >= 0 && n < len(lines) {
			return consoleEntry(l.conBase+"/Entries", n, lines[n]), true, nil
		}
	}
	return nil, false, nil
}

// under reports whether p is base or below it.
func under(p, base string) bool {
	return base != "" && (p == base || strings.HasPrefix(p, base+"/"))
}

// logServices is the LogServices collection at p: the mockup's members,
// where it has that collection, and this BMC's services.
func (b *BMC) logServices(p string) map[string]any {
	doc := map[string]any{"@odata.id": p, "@odata.type": "#LogServiceCollection.LogServiceCollection",
		"Name": "Log Service Collection"}
	ms := []any{}
	if res, ok := b.tree.docs[p]; ok {
		if d, err := decodeDoc(res.body); err == nil {
			doc = d
			for _, m := range members(d) {
				if m != b.logs.selBase && m != b.logs.conBase {
					ms = append(ms, map[string]any{"@odata.id": m})
				}
			}
		}
	}
	for _, s := range []struct{ coll, base string }{{b.logs.selColl, b.logs.selBase}, {b.logs.conColl, b.logs.conBase}} {
		if s.coll == p && s.base != "" {
			ms = append(ms, map[string]any{"@odata.id": s.base})
		}
	}
	doc["Members"] = ms
	doc["Members@odata.count"] = jsonInt(int64(len(ms)))
	return doc
}

// logService is a LogService resource; entryType "" leaves LogEntryType
// out (OpenBMC's HostLogger has none).
func logService(p, id, name, entryType string, now time.Time) map[string]any {
	doc := map[string]any{
		"@odata.id": p, "@odata.type": "#LogService.v1_2_0.LogService",
		"Id": id, "Name": name, "Description": name,
		"ServiceEnabled": true, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"DateTime": now.UTC().Format(time.RFC3339), "DateTimeLocalOffset": "+00:00",
		"Entries": map[string]any{"@odata.id": p + "/Entries"},
	}
	if entryType != "" {
		doc["LogEntryType"] = entryType
		doc["OverWritePolicy"] = "WrapsWhenFull"
		doc["MaxNumberOfRecords"] = jsonInt(selCapacity)
	}
	return doc
}

// paging reads $skip and $top (DSP0266 7.3); $top is capped at page.
func paging(q url.Values, page int) (skip, top int, bad *message) {
	skip, top = 0, page
	for _, o := range []struct {
		name string
		v    *int
	}{{"$skip", &skip}, {"$top", &top}} {
		if !q.Has(o.name) {
			continue
		}
		n, err := strconv.Atoi(q.Get(o.name))
		if err != nil || n < 0 {
			return 0, 0, ptr(msgQueryValue(q.Get(o.name), o.name))
		}
		*o.v = n
	}
	return skip, min(top, page), nil
}

// entryCollection is one page of a LogEntryCollection of n entries, the
// members inline (as iDRAC and bmcweb serve them), with a nextLink while
// more follow.
func entryCollection(p string, n, skip, top int, entry func(int) map[string]any) map[string]any {
	ms := []any{}
	for i := skip; i < n && i < skip+top; i++ {
		ms = append(ms, entry(i))
	}
	doc := map[string]any{"@odata.id": p, "@odata.type": "#LogEntryCollection.LogEntryCollection",
		"Name": "Log Entry Collection", "Members": ms, "Members@odata.count": jsonInt(int64(n))}
	if skip+top < n && top > 0 {
		doc["Members@odata.nextLink"] = p + "?$skip=" + strconv.Itoa(skip+top)
	}
	return doc
}

// selEntry is a SEL entry as a LogEntry resource in the collection coll.
func selEntry(coll string, e LogEntry) map[string]any {
	created := e.CreatedRaw
	if created == "" {
		created = e.Created.UTC().Format(time.RFC3339)
	}
	doc := map[string]any{
		"@odata.id": coll + "/" + e.ID, "@odata.type": "#LogEntry.v1_9_0.LogEntry",
		"Id": e.ID, "Name": "Log Entry " + e.ID, "EntryType": "SEL", "Created": created,
		"Severity": orDefault(e.Severity, "OK"), "Message": e.Message,
		"EntryCode": orDefault(e.EntryCode, "Assert"),
	}
	if e.MessageID != "" {
		doc["MessageId"] = e.MessageID
	}
	if e.SensorType != "" {
		doc["SensorType"] = e.SensorType
	}
	return doc
}

// consoleEntry is console line i, as OpenBMC's HostLogger serves it.
func consoleEntry(coll string, i int, line string) map[string]any {
	id := strconv.Itoa(i)
	return map[string]any{
		"@odata.id": coll + "/" + id, "@odata.type": "#LogEntry.v1_9_0.LogEntry",
		"Id": id, "Name": "Host Logger Entry", "EntryType": "Oem", "OemRecordFormat": "Host Logger Entry",
		"Severity": "OK", "Message": line,
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// consoleLines reads the last consoleMaxBytes of the console file, a line
// an entry (a line cut by that limit is left out). A file not there yet
// (the host never ran) is an empty console. b.mu held.
func (b *BMC) consoleLines() []string {
	data, err := readTail(b.cfg.Console, consoleMaxBytes)
	if err != nil {
		b.log.Debug("serial console unreadable", "bmc", b.String(), "file", b.cfg.Console, "err", err)
		return nil
	}
	return splitLines(data)
}

// msgQueryValue refuses a query option's value.
func msgQueryValue(value, option string) message {
	return message{"Base.1.0.QueryParameterValueTypeError",
		fmt.Sprintf("The value %s for the query parameter %s is of a different type than the parameter can accept.", value, option),
		[]string{value, option}, "Warning", "Correct the value for the query parameter in the request and resubmit the request if the operation failed."}
}
