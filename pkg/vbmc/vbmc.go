// Package vbmc is a virtual BMC: a Redfish service that serves any mockup
// tree in the DMTF layout (Root/redfish/v1/.../index.json) and keeps state
// like a real BMC — power, one-time boot override, pending BIOS settings
// applied at the next reset, accounts and sessions with authentication
// enforced, virtual media, an event log (SEL) of what it did and the
// host's serial console — with fault injection (latency, 503s, dropped
// connections, hung endpoints) for testing Redfish clients without hardware.
//
// A BMC is an http.Handler; Serve and StartFleet put one or many on
// listeners. A Backend (see QEMU) turns power actions into real effects.
package vbmc

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one virtual BMC.
type Config struct {
	// Root is a mockup directory in the DMTF layout: Root/redfish/v1/index.json.
	Root string
	// Username and Password are the enforced credentials; when Username is
	// "" every request is accepted without authentication.
	Username, Password string
	// Backend drives the first System of the mockup (in Systems collection
	// order); nil keeps power state in memory only.
	Backend Backend
	// Faults are injected into every request.
	Faults Faults
	// MaxSessions refuses logins beyond this many open sessions, as BMCs
	// that lock out clients leaking sessions do: 503 with iDRAC's "The
	// maximum number of user sessions is reached" (MessageId
	// Base.1.0.SessionLimitExceeded); 0 means no limit.
	MaxSessions int
	// SessionTimeout ends sessions idle this long (the next request with
	// the token gets 401, as on real BMCs); 0 keeps them until deleted.
	SessionTimeout time.Duration
	// Lockout locks an account after failed logins (see Lockout); the zero
	// value never locks.
	Lockout Lockout
	// EnforcePasswordLength refuses a PATCHed Password outside the
	// AccountService's MinPasswordLength..MaxPasswordLength (400
	// PropertyValueFormatError), as real BMCs do. Off by default: captured
	// mockups' limits would refuse the short passwords tests use.
	EnforcePasswordLength bool
	// Now is the clock for session timeouts and account lockout (default
	// time.Now).
	Now func() time.Time
	// StuckBIOS names BIOS attributes that "refuse to stick": their pending
	// values are dropped at the reset instead of applied, as on BMCs that
	// accept a setting and silently ignore it.
	StuckBIOS []string
	// Console is a file holding the host's serial console output (for a
	// QEMU backend, the file its -serial chardev writes; the lab's
	// console.log). It is served as OpenBMC serves its host's console: the
	// HostLogger LogService of the System, a line an entry (see logs.go).
	// "": no serial console, as on most real BMCs.
	Console string
	// Logger gets one debug line per request; nil discards.
	Logger *slog.Logger
	// Seed makes fault randomness reproducible.
	Seed int64
	// Update scripts the UpdateService: task time, apply time and faults
	// (see Update).
	Update Update
}

// Faults are injected into requests, in this order: latency, hang, dropped
// connection, 503.
type Faults struct {
	// Latency delays every request (the client may give up first).
	Latency time.Duration
	// Error503 is the probability (0..1) of answering 503 with Retry-After.
	Error503 float64
	// DropConn is the probability (0..1) of closing the connection without
	// an answer.
	DropConn float64
	// Hang lists path prefixes (e.g. "/redfish/v1/Systems") that never
	// answer: the request blocks until the client goes away.
	Hang []string
	// MaxInFlight answers 503 to requests beyond this many at once, as
	// small BMCs do (0: no limit). Stats().MaxInFlight shows what a client
	// attempted either way.
	MaxInFlight int
}

// BMC is one virtual BMC; it implements http.Handler.
type BMC struct {
	cfg    Config
	log    *slog.Logger
	tree   *tree
	faults *faulter
	stuck  map[string]bool

	driving sync.Mutex // serializes Backend power changes

	mu       sync.Mutex
	overlay  map[string]map[string]any // resources this BMC changed
	etags    map[string]string         // entity tags of overlay resources
	gen      int                       // source of new entity tags
	creds    map[string]string         // user name -> password
	sessions map[string]*session       // X-Auth-Token -> session
	nextSess int
	policy   lockoutPolicy             // account lockout in force
	fails    map[string]*failures      // user name -> failed logins in a row
	pending  map[string]map[string]any // BIOS resource path -> pending attributes
	powered  string                    // System the Backend drives ("" = none)
	script   *script                   // scripted readings (Script), nil: the mockup's
	logs     logState                  // the event log (SEL) and where the log services live
	upd      updateState               // the UpdateService's tasks and staged firmware (update.go)
	paths    updatePaths               // where the UpdateService takes requests

	requests     atomic.Int64
	inFlight     atomic.Int64
	maxInFlight  atomic.Int64
	failedLogins atomic.Int64
}

// New loads cfg.Root and returns a BMC serving it.
func New(cfg Config) (*BMC, error) {
	t, err := loadTree(cfg.Root)
	if err != nil {
		return nil, err
	}
	return newBMC(cfg, t)
}

// newBMC makes a BMC over an already loaded (shared, read-only) tree.
func newBMC(cfg Config, t *tree) (*BMC, error) {
	if err := cfg.Faults.check(); err != nil {
		return nil, err
	}
	if err := cfg.Lockout.check(); err != nil {
		return nil, err
	}
	if err := cfg.Update.check(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b := &BMC{
		cfg:      cfg,
		log:      log,
		tree:     t,
		faults:   newFaulter(cfg.Faults, cfg.Seed),
		stuck:    map[string]bool{},
		overlay:  map[string]map[string]any{},
		etags:    map[string]string{},
		creds:    map[string]string{},
		sessions: map[string]*session{},
		pending:  map[string]map[string]any{},
		fails:    map[string]*failures{},
	}
	if b.cfg.Now == nil {
		b.cfg.Now = time.Now
	}
	for _, a := range cfg.StuckBIOS {
		b.stuck[a] = true
	}
	if cfg.Username != "" {
		b.creds[cfg.Username] = cfg.Password
		b.linkAccount(cfg.Username)
	}
	b.initLockout()
	if cfg.Backend != nil {
		if sys := b.systems(); len(sys) > 0 {
			b.powered = sys[0]
		}
	}
	b.initLogs()
	b.initUpdate()
	return b, nil
}

// Power returns the PowerState of the first System ("On", "Off"), for tests.
func (b *BMC) Power() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	sys := b.systems()
	if len(sys) == 0 {
		return ""
	}
	return b.powerState(sys[0])
}

// PowerOf returns the PowerState of the System at path ("/redfish/v1/Systems/Node1").
func (b *BMC) PowerOf(system string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.powerState(cleanPath(system))
}

// Stats counts what a BMC has seen, so tests can check client behaviour.
type Stats struct {
	Requests     int64 // requests received, faults included
	MaxInFlight  int64 // most requests handled at the same time
	OpenSessions int   // sessions created and not yet deleted
	FailedLogins int64 // logins refused: session creations and basic credentials (wrong, unknown or locked)
}

// Stats returns the counters so far.
func (b *BMC) Stats() Stats {
	return Stats{Requests: b.requests.Load(), MaxInFlight: b.maxInFlight.Load(), OpenSessions: b.OpenSessions(),
		FailedLogins: b.failedLogins.Load()}
}

// OpenSessions counts sessions created and not deleted: a client that leaks
// sessions makes it grow (real BMCs then lock the client out).
func (b *BMC) OpenSessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

// ServeHTTP answers one Redfish request.
func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.requests.Add(1)
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		m := b.maxInFlight.Load()
		if n <= m || b.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	start := time.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	var outcome string
	if lim := b.cfg.Faults.MaxInFlight; lim > 0 && n > int64(lim) {
		rec.Header().Set("Retry-After", "1")
		writeError(rec, http.StatusServiceUnavailable, msgBusy(lim))
		outcome = "busy"
	} else {
		outcome = b.serve(rec, r)
	}
	b.log.Debug("redfish request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
		"outcome", outcome, "duration", time.Since(start).Round(time.Microsecond), "remote", r.RemoteAddr)
}

// serve applies faults, then authentication, then routes. It returns what
// happened for the log line ("ok", "hang", "drop", "503").
func (b *BMC) serve(w *recorder, r *http.Request) string {
	if f := b.faults.apply(r.Context(), w, r); f != "" {
		return f
	}
	b.mu.Lock()
	b.advanceUpdates()
	down := b.restarting()
	b.mu.Unlock()
	if down {
		// A BMC restarting after a flash: the connection ends unanswered.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		conn.Close()
		return "restarting"
	}
	p := cleanPath(r.URL.Path)
	if p == "/redfish" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, msgNotAllowed(r.Method, r.URL.Path))
			return "ok"
		}
		writeJSON(w, http.StatusOK, []byte(`{"v1": "/redfish/v1/"}`+"\n"), "")
		return "ok"
	}
	if !strings.HasPrefix(p, serviceRoot) && (p != b.paths.push || p == "") {
		writeError(w, http.StatusNotFound, msgMissing(r.URL.Path))
		return "ok"
	}
	isLogin := r.Method == http.MethodPost && p == sessionsPath
	if !isLogin && !public(p) {
		if ok := b.authorize(w, r); !ok {
			return "ok"
		}
	}
	b.route(w, r, p)
	return "ok"
}

// public lists what Redfish serves without authentication (DSP0266 13.3.4).
func public(p string) bool {
	return p == serviceRoot || p == serviceRoot+"/odata" || p == serviceRoot+"/$metadata"
}

func (b *BMC) route(w http.ResponseWriter, r *http.Request, p string) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		b.get(w, p, r.URL.Query())
	case http.MethodPost:
		b.post(w, r, p)
	case http.MethodPatch:
		b.patch(w, r, p)
	case http.MethodDelete:
		b.delete(w, r, p)
	default:
		writeError(w, http.StatusMethodNotAllowed, msgNotAllowed(r.Method, r.URL.Path))
	}
}

func (b *BMC) get(w http.ResponseWriter, p string, q url.Values) {
	if b.monitor(w, p) {
		return
	}
	b.mu.Lock()
	b.expireLocks()
	if doc, found, bad := b.logDoc(p, q); found || bad != nil {
		b.mu.Unlock()
		if bad != nil {
			writeError(w, http.StatusBadRequest, *bad)
			return
		}
		body, err := encodeDoc(doc)
		if err != nil {
			writeError(w, http.StatusInternalServerError, msgInternal(err))
			return
		}
		writeJSON(w, http.StatusOK, body, "")
		return
	}
	body, etag, ok := b.render(p)
	if ok && q.Has("$expand") {
		body = b.expand(body, q.Get("$expand"))
	}
	b.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, msgMissing(p))
		return
	}
	writeJSON(w, http.StatusOK, body, etag)
}

func (b *BMC) post(w http.ResponseWriter, r *http.Request, p string) {
	switch {
	case p == sessionsPath:
		b.login(w, r)
	case strings.HasSuffix(p, "/Actions/ComputerSystem.Reset"):
		b.reset(w, r, p)
	case strings.HasSuffix(p, "/Actions/VirtualMedia.InsertMedia"),
		strings.HasSuffix(p, "/Actions/VirtualMedia.EjectMedia"):
		b.mediaAction(w, r, p)
	case b.isUpdatePost(p):
		b.postUpdate(w, r, p)
	default:
		b.notAllowed(w, r, p)
	}
}

func (b *BMC) patch(w http.ResponseWriter, r *http.Request, p string) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, msgMalformed(err))
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocks()
	doc, ok := b.peek(p)
	if !ok {
		writeError(w, http.StatusNotFound, msgMissing(p))
		return
	}
	if m := b.checkIfMatch(r, p); m != nil {
		writeError(w, http.StatusPreconditionFailed, *m)
		return
	}
	var status int
	var msg *message
	switch {
	case typeIs(doc, "ComputerSystem"):
		status, msg = b.patchSystem(p, body)
	case typeIs(doc, "Bios"):
		status, msg = b.patchBios(p, body)
	case typeIs(doc, "ManagerAccount"):
		status, msg = b.patchAccount(p, body)
	case typeIs(doc, "AccountService"):
		status, msg = b.patchAccountService(p, body)
	case typeIs(doc, "VirtualMedia"):
		status, msg = b.patchMedia(p, body)
	case typeIs(doc, "UpdateService"):
		status, msg = b.patchUpdateService(p, body)
	default:
		status, msg = http.StatusMethodNotAllowed, ptr(msgNotAllowed(r.Method, p))
	}
	if msg != nil {
		writeError(w, status, *msg)
		return
	}
	out, etag, _ := b.render(p)
	writeJSON(w, http.StatusOK, out, etag)
}

func (b *BMC) delete(w http.ResponseWriter, r *http.Request, p string) {
	if strings.HasPrefix(p, sessionsPath+"/") {
		b.logout(w, p)
		return
	}
	b.notAllowed(w, r, p)
}

// notAllowed answers 404 for a missing resource and 405 for an existing one.
func (b *BMC) notAllowed(w http.ResponseWriter, r *http.Request, p string) {
	b.mu.Lock()
	_, ok := b.peek(p)
	if !ok {
		_, ok, _ = b.logDoc(p, nil)
	}
	b.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, msgMissing(p))
		return
	}
	writeError(w, http.StatusMethodNotAllowed, msgNotAllowed(r.Method, p))
}

func ptr[T any](v T) *T { return &v }

// String names the BMC for logs and errors.
func (b *BMC) String() string { return fmt.Sprintf("vbmc(%s)", b.cfg.Root) }
