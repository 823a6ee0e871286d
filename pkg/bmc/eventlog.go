package bmc

// This file reads what a BMC logged: the entries of every LogService of its
// Managers and Systems (the SEL; iDRAC's Sel and Lclog, HPE's IEL and IML,
// OpenBMC's EventLog ...), and the host's serial console where the BMC
// keeps one. Redfish has no standard serial console log: the one read is
// OpenBMC's HostLogger LogService (ingot's virtual BMC serves the same
// shape). iDRAC, iLO and most others offer Serial-over-LAN, which is live,
// not a log; SerialConsole says so with ErrNoConsole.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// Limits of a log read.
const (
	DefaultEventLogMax  = 1000    // entries EventLog returns when asked for max <= 0
	DefaultConsoleBytes = 1 << 20 // bytes SerialConsole returns when asked for maxBytes <= 0

	maxLogPages      = 64   // pages read of one entry collection
	maxLinkedEntries = 64   // entries fetched one by one from a page that lists only links
	maxMessage       = 4096 // bytes of an entry's Message kept
)

// ErrNoConsole is the underlying error (in a *Error of KindUnsupported) of
// SerialConsole on a BMC that keeps no serial console log.
var ErrNoConsole = errors.New("the BMC keeps no serial console log (Redfish has no standard one; " +
	"the one read is OpenBMC's HostLogger LogService, which this BMC does not offer)")

// LogEntry is one entry of a BMC's event log.
type LogEntry struct {
	Created    time.Time `json:"created"`               // UTC; zero when the BMC gave no usable date
	Severity   string    `json:"severity,omitempty"`    // OK, Warning or Critical
	Message    string    `json:"message"`               // at most 4 KiB
	MessageID  string    `json:"message_id,omitempty"`  // registry message: "OpenBMC.0.1.DCPowerOn"
	SensorType string    `json:"sensor_type,omitempty"` // SEL entries: "Fan", "Power Supply / Converter" ...
	Service    string    `json:"service"`               // the LogService it is in: "Managers/iDRAC.Embedded.1/LogServices/Sel"
	ID         string    `json:"id,omitempty"`          // its Id in that service
}

// String is the entry on one line, for people: date, severity, service,
// message, message id and sensor type.
func (e LogEntry) String() string {
	when := "(no date)"
	if !e.Created.IsZero() {
		when = e.Created.UTC().Format(time.RFC3339)
	}
	msg := strings.Join(strings.Fields(e.Message), " ")
	s := fmt.Sprintf("%-20s  %-8s  %s: %s", when, orNone(e.Severity, "-"), e.Service, msg)
	if e.MessageID != "" {
		s += " [" + e.MessageID + "]"
	}
	if e.SensorType != "" {
		s += " (" + e.SensorType + ")"
	}
	return s
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// EventLog returns the entries created at or after since (zero: all) of
// every LogService of every Manager and System, oldest first, at most max
// (the newest; max <= 0 takes DefaultEventLogMax). The host's serial
// console (HostLogger) and BIOS POST codes (OpenBMC's PostCodes) are not
// events and are left out; so are entries without a usable date when
// since is set. A BMC without LogServices has an empty log, not an error.
// A service that fails is skipped (logged at debug); the call fails only
// when no service could be read at all.
func (c *Client) EventLog(ctx context.Context, since time.Time, max int) ([]LogEntry, error) {
	if max <= 0 {
		max = DefaultEventLogMax
	}
	api, err := c.gf(ctx)
	if err != nil {
		return nil, err
	}
	svcs, errs := c.logServices(api)
	svcs = slices.DeleteFunc(svcs, func(s logService) bool { return !s.events() })
	got := make([][]LogEntry, len(svcs))
	failed := make([]error, len(svcs))
	fns := make([]func(), len(svcs))
	for i, s := range svcs {
		fns[i] = func() { got[i], failed[i] = c.readEntries(api, s, since) }
	}
	parallel(fns...)
	if ctx.Err() != nil {
		return nil, c.wrap("reading the event log", ctx.Err())
	}
	var out []LogEntry
	read := 0
	for i := range svcs {
		if failed[i] == nil || len(got[i]) > 0 {
			read++
		}
		if failed[i] != nil {
			errs = append(errs, c.wrap("reading the event log "+svcs[i].entries, failed[i]))
		}
		for _, e := range got[i] {
			if since.IsZero() || !e.Created.IsZero() && !e.Created.Before(since) {
				out = append(out, e)
			}
		}
	}
	if read == 0 && len(errs) > 0 {
		return nil, errs[0]
	}
	for _, err := range errs {
		c.log.Debug("bmc event log: a log service was not read", "bmc", c.cfg.Endpoint, "err", err)
	}
	slices.SortStableFunc(out, func(a, b LogEntry) int { return a.Created.Compare(b.Created) })
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out, nil
}

// SerialConsole returns the last maxBytes (maxBytes <= 0:
// DefaultConsoleBytes) of the host's serial console as the BMC keeps it, a
// line of output a line, whole lines only. A BMC that keeps none fails
// with a *Error of KindUnsupported wrapping ErrNoConsole.
func (c *Client) SerialConsole(ctx context.Context, maxBytes int) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultConsoleBytes
	}
	api, err := c.gf(ctx)
	if err != nil {
		return nil, err
	}
	svcs, errs := c.logServices(api)
	i := slices.IndexFunc(svcs, logService.console)
	switch {
	case i < 0 && len(errs) > 0:
		return nil, errs[0] // it may be in what could not be read
	case i < 0:
		return nil, &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: "reading the serial console", Err: ErrNoConsole}
	}
	lines, err := c.consoleLines(api, svcs[i], maxBytes)
	if err != nil {
		return nil, c.wrap("reading the serial console "+svcs[i].entries, err)
	}
	return tail(lines, maxBytes), nil
}

// logService is one LogService of a Manager or System.
type logService struct {
	uri     string // /redfish/v1/Managers/BMC/LogServices/SEL
	id      string // its Id: SEL, Sel, Lclog, IML, EventLog, HostLogger ...
	entries string // its Entries collection
}

// console reports OpenBMC's HostLogger: the host's serial console, a line
// an entry.
func (s logService) console() bool { return strings.EqualFold(s.id, "HostLogger") }

// events reports a service of events: not the console, and not OpenBMC's
// PostCodes (every BIOS POST code of every boot, thousands of entries).
func (s logService) events() bool { return !s.console() && !strings.EqualFold(s.id, "PostCodes") }

func (s logService) name() string { return partName(s.uri) }

// logServices lists the LogServices of every Manager and System, in URI
// order. A resource without LogServices, or whose link answers 404 (the
// captured mockups had their logs cut out), has none; other failures are
// returned beside what was found.
func (c *Client) logServices(api *gofish.APIClient) ([]logService, []error) {
	var mu sync.Mutex
	var out []logService
	var errs []error
	fail := func(uri string, err error) bool {
		if err == nil {
			return false
		}
		if err = c.wrap("reading "+uri, err); !IsKind(err, KindNotFound) && !IsKind(err, KindUnsupported) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return true
	}
	var owners []string
	for _, coll := range []string{"/redfish/v1/Managers", "/redfish/v1/Systems"} {
		var d struct{ Members []odataLink }
		if _, err := getJSON(api, coll, &d); !fail(coll, err) {
			for _, m := range d.Members {
				owners = append(owners, m.ID)
			}
		}
	}
	fns := make([]func(), len(owners))
	for i, o := range owners {
		fns[i] = func() {
			found := c.servicesOf(api, o, fail)
			mu.Lock()
			out = append(out, found...)
			mu.Unlock()
		}
	}
	parallel(fns...)
	slices.SortFunc(out, func(a, b logService) int { return strings.Compare(a.uri, b.uri) })
	return out, errs
}

// servicesOf reads the LogServices of the Manager or System at owner.
func (c *Client) servicesOf(api *gofish.APIClient, owner string, fail func(string, error) bool) []logService {
	var o struct{ LogServices odataLink }
	if _, err := getJSON(api, owner, &o); fail(owner, err) || o.LogServices.ID == "" {
		return nil
	}
	var coll struct{ Members []odataLink }
	if _, err := getJSON(api, o.LogServices.ID, &coll); fail(o.LogServices.ID, err) {
		return nil
	}
	var out []logService
	for _, m := range coll.Members {
		var s struct {
			ID      string `json:"Id"`
			Entries odataLink
		}
		if _, err := getJSON(api, m.ID, &s); fail(m.ID, err) || s.Entries.ID == "" {
			continue
		}
		out = append(out, logService{uri: cleanURI(m.ID), id: s.ID, entries: s.Entries.ID})
	}
	return out
}

// readEntries reads the entries of s, following the collection's
// nextLinks. A log served newest first is read only back to since. What
// was read before a page failed is returned with the error.
func (c *Client) readEntries(api *gofish.APIClient, s logService, since time.Time) ([]LogEntry, error) {
	var out []LogEntry
	seen := map[string]bool{}
	for uri := s.entries; uri != "" && !seen[uri] && len(seen) < maxLogPages; {
		seen[uri] = true
		p, err := c.readPage(api, uri, s.name())
		if err != nil {
			return out, err
		}
		out = append(out, p.entries...)
		if n := len(p.entries); n > 1 && !since.IsZero() {
			first, last := p.entries[0].Created, p.entries[n-1].Created
			if !last.IsZero() && first.After(last) && last.Before(since) {
				break // newest first, and this page reached back past since
			}
		}
		uri = p.next
	}
	return out, nil
}

// readPage reads one page of entries. Members given only as links (HPE
// iLO without $expand) are asked for again expanded where the BMC expands,
// else fetched one by one (the last maxLinkedEntries of the page).
func (c *Client) readPage(api *gofish.APIClient, uri, service string) (entryPage, error) {
	b, err := getBody(api, uri)
	if err != nil {
		return entryPage{}, err
	}
	p, err := parseEntries(b, service)
	if err != nil {
		return p, &Error{Kind: KindBadResponse, Op: "reading " + uri, Err: err}
	}
	if len(p.links) == 0 {
		return p, nil
	}
	if e := expandOf(api); e.ok {
		if b, err := getBody(api, withQuery(uri, "$expand="+e.opt)); err == nil {
			if xp, err := parseEntries(b, service); err == nil && len(xp.links) == 0 {
				return xp, nil
			}
		}
	}
	links := p.links[max(0, len(p.links)-maxLinkedEntries):]
	got := make([]LogEntry, len(links))
	ok := make([]bool, len(links))
	fns := make([]func(), len(links))
	for i, l := range links {
		fns[i] = func() {
			if b, err := getBody(api, l); err == nil {
				got[i], ok[i] = parseEntry(b, service)
			}
		}
	}
	parallel(fns...)
	for i := range got {
		if ok[i] {
			p.entries = append(p.entries, got[i])
		}
	}
	return p, nil
}

// consoleLines reads the console service's last lines: where the
// collection is paged, it jumps ($skip) to about twice maxBytes from the
// end, judging line length from the first page, then reads to the end.
func (c *Client) consoleLines(api *gofish.APIClient, s logService, maxBytes int) ([]string, error) {
	p, err := c.readPage(api, s.entries, s.name())
	if err != nil {
		return nil, err
	}
	lines := messages(p.entries)
	next := p.next
	if next != "" && len(lines) > 0 && p.count > len(lines) {
		avg := max(1, size(lines)/len(lines))
		if skip := p.count - 2*maxBytes/avg - 1; skip > len(lines) {
			lines, next = nil, withQuery(s.entries, "$skip="+strconv.Itoa(skip))
		}
	}
	seen := map[string]bool{s.entries: true}
	for ; next != "" && !seen[next] && len(seen) < maxLogPages; next = p.next {
		seen[next] = true
		if p, err = c.readPage(api, next, s.name()); err != nil {
			return nil, err
		}
		lines = append(lines, messages(p.entries)...)
		for len(lines) > 1 && size(lines) > 2*maxBytes {
			lines = lines[len(lines)/2:] // keep memory bounded on a long console
		}
	}
	return lines, nil
}

func messages(es []LogEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Message
	}
	return out
}

func size(lines []string) int {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	return n
}

// tail is the last maxBytes of lines, whole lines, each ending in a newline.
func tail(lines []string, maxBytes int) []byte {
	var b []byte
	for _, l := range lines {
		b = append(b, l...)
		b = append(b, '\n')
	}
	if len(b) <= maxBytes {
		return b
	}
	b = b[len(b)-maxBytes:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return nil
}

// withQuery adds a query option to uri.
func withQuery(uri, opt string) string {
	if strings.Contains(uri, "?") {
		return uri + "&" + opt
	}
	return uri + "?" + opt
}

// getBody GETs uri and returns its body.
func getBody(api schemas.Client, uri string) ([]byte, error) {
	resp, err := api.Get(uri)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// entryPage is one page of a LogEntryCollection as read.
type entryPage struct {
	entries []LogEntry
	links   []string // members given as links only, not inline
	next    string   // Members@odata.nextLink: the next page, "" on the last
	count   int      // Members@odata.count, -1 when not given
}

// parseEntries reads one page of a LogEntryCollection (untrusted bytes: a
// BMC's answer). Members that are not objects are skipped; a member with
// nothing but its link is listed in links.
func parseEntries(b []byte, service string) (entryPage, error) {
	p := entryPage{count: -1}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return p, fmt.Errorf("expected a LogEntryCollection object: %w", err)
	}
	var ms []json.RawMessage
	if raw, ok := top["Members"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &ms); err != nil {
			return p, fmt.Errorf("Members: expected an array: %w", err)
		}
	}
	if n, err := strconv.Atoi(text(top["Members@odata.count"])); err == nil && n >= 0 {
		p.count = n
	}
	p.next = localLink(text(top["Members@odata.nextLink"]))
	for _, m := range ms {
		var f map[string]json.RawMessage
		if json.Unmarshal(m, &f) != nil {
			continue
		}
		if e, ok := entryOf(f, service); ok {
			p.entries = append(p.entries, e)
		} else if l := localLink(text(f["@odata.id"])); l != "" {
			p.links = append(p.links, l)
		}
	}
	return p, nil
}

// parseEntry reads one LogEntry resource.
func parseEntry(b []byte, service string) (LogEntry, bool) {
	var f map[string]json.RawMessage
	if json.Unmarshal(b, &f) != nil {
		return LogEntry{}, false
	}
	return entryOf(f, service)
}

// entryOf reads a LogEntry's fields leniently: a string, or a number's
// text; anything else reads as absent. An object with none of Message,
// MessageId, Created, EventTimestamp and EntryType is a bare link.
func entryOf(f map[string]json.RawMessage, service string) (LogEntry, bool) {
	has := false
	for _, k := range []string{"Message", "MessageId", "Created", "EventTimestamp", "EntryType"} {
		if _, ok := f[k]; ok {
			has = true
		}
	}
	if !has {
		return LogEntry{}, false
	}
	e := LogEntry{
		Service:    service,
		ID:         text(f["Id"]),
		Severity:   orNone(text(f["Severity"]), text(f["MessageSeverity"])), // Severity is deprecated for MessageSeverity
		Message:    untrimmed(f["Message"]),
		MessageID:  text(f["MessageId"]),
		SensorType: orNone(text(f["SensorType"]), text(f["OemSensorType"])),
		Created:    logTime(orNone(text(f["Created"]), text(f["EventTimestamp"]))),
	}
	if e.Message == "" && e.MessageID != "" {
		var args []string
		_ = json.Unmarshal(f["MessageArgs"], &args)
		e.Message = e.MessageID
		if len(args) > 0 {
			e.Message += " (" + strings.Join(args, ", ") + ")"
		}
	}
	e.Message = clip(e.Message, maxMessage)
	return e, true
}

// text is a JSON string's value trimmed, or a number's text; "" for
// anything else.
func text(raw json.RawMessage) string { return strings.TrimSpace(untrimmed(raw)) }

// untrimmed is text with its spaces kept (a console line's).
func untrimmed(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// localLink is a link on the BMC as a path and query ("" when it is none):
// an absolute URL keeps only its path, so a link never leads the client to
// another host.
func localLink(s string) string {
	if strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || !strings.HasPrefix(u.Path, "/") {
		return ""
	}
	return u.RequestURI()
}

// logTime reads a LogEntry's date: RFC 3339 as Redfish has it, or what
// BMCs send instead (no zone, read as UTC; a space for the T; an offset
// without its colon). A date before 1990 is a clock that was never set
// (IPMI SEL time stamps count from 1970 until it is) and reads as none, as
// does anything else.
func logTime(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05",
		"2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05Z0700", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			if t.Year() < 1990 {
				return time.Time{}
			}
			return t.UTC()
		}
	}
	return time.Time{}
}
