// Package web is ingot's dashboard: server-rendered HTML pages (the
// fleet's racks, a machine, recipes, jobs and rollouts, power and cost,
// alerts) and the few actions an operator takes from them (reimage a
// machine, start a rollout, cancel a job, silence an alert). It is a
// transport like pkg/apiserver, over the same core services (pkg/fleet,
// pkg/engine, pkg/telemetry) and the same tokens: an operator or
// read-only token logs in and becomes a session cookie. It never opens
// the store.
//
// Every page works without JavaScript; assets/app.js adds local times on
// hover and live job progress (server-sent events), and the vendored htmx
// (assets/vendor, checked by a test) filters the fleet as one types.
// pkg/serve mounts it on the API's TLS listener only: a session cookie is
// Secure and never crosses plain HTTP.
package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// Prefix is where the dashboard lives; GET / redirects there.
const Prefix = "/ui/"

// Config builds a Server.
type Config struct {
	Fleet  *fleet.Service
	Engine *engine.Engine
	// Telemetry answers readings, alerts, power and cost; nil: the server
	// polls no BMCs and those pages say so.
	Telemetry   *telemetry.Service
	Recipes     func(name string) (*recipe.Recipe, error)
	RecipeNames func() []string
	Logger      *slog.Logger
	Version     string
	Now         func() time.Time
	// SessionTTL is how long a session lives from login (default 12h);
	// SessionIdle ends one unused that long (default 1h). Either way the
	// session ends at once when its token is revoked or expires.
	SessionTTL  time.Duration
	SessionIdle time.Duration
	// Heartbeat is how often a live stream sends a comment and checks its
	// session (default 15 s).
	Heartbeat time.Duration
	// Poll is how often a live stream reads its job (default 500 ms).
	Poll time.Duration
}

// Server serves the dashboard. Safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	pages    *pages
	assets   *assets
	facts    *factsCache
	stopping chan struct{} // closed by Run when the server stops
	stopOnce sync.Once
}

// New builds a Server; Fleet, Engine and Recipes are required.
func New(cfg Config) (*Server, error) {
	if cfg.Fleet == nil || cfg.Engine == nil || cfg.Recipes == nil {
		return nil, errors.New("web: Fleet, Engine and Recipes are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RecipeNames == nil {
		cfg.RecipeNames = func() []string { return nil }
	}
	cfg.SessionTTL = orDuration(cfg.SessionTTL, 12*time.Hour)
	cfg.SessionIdle = orDuration(cfg.SessionIdle, time.Hour)
	cfg.Heartbeat = orDuration(cfg.Heartbeat, 15*time.Second)
	cfg.Poll = orDuration(cfg.Poll, 500*time.Millisecond)
	as, err := loadAssets()
	if err != nil {
		return nil, err
	}
	ps, err := parsePages(as)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, log: cfg.Logger, sessions: newSessions(cfg.Now, cfg.SessionTTL, cfg.SessionIdle),
		pages: ps, assets: as, facts: newFactsCache(), stopping: make(chan struct{})}, nil
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// access is who may call a route.
type access int

const (
	anyone access = iota // the login page, assets
	reader               // a session of any token
	actor                // a session of an operator token, with the form's CSRF token
)

type route struct {
	pattern string
	access  access
	h       func(w http.ResponseWriter, r *http.Request, s *session) error
}

func (s *Server) routes() []route {
	return []route{
		{"GET /ui/{$}", reader, s.fleetPage},
		{"GET /ui/login", anyone, s.loginPage},
		{"POST /ui/login", anyone, s.login},
		{"POST /ui/logout", reader, s.logout},
		{"GET /ui/machines/{name}", reader, s.machinePage},
		{"GET /ui/machines/{name}/reimage", reader, s.reimageConfirm},
		{"POST /ui/machines/{name}/reimage", actor, s.reimage},
		{"GET /ui/recipes", reader, s.recipesPage},
		{"POST /ui/rollouts", actor, s.startRollout},
		{"GET /ui/jobs", reader, s.jobsPage},
		{"GET /ui/jobs/{id}", reader, s.jobPage},
		{"GET /ui/jobs/{id}/stream", reader, s.jobStream},
		{"POST /ui/jobs/{id}/cancel", actor, s.cancelJob},
		{"GET /ui/power", reader, s.powerPage},
		{"GET /ui/alerts", reader, s.alertsPage},
		{"POST /ui/alerts/silence", actor, s.silence},
	}
}

// Register mounts the dashboard on mux: every route under Prefix, and
// GET / redirecting there. Requests that change something are refused
// when they come from another origin (http.CrossOriginProtection, besides
// each form's CSRF token and the cookie's SameSite=Strict).
func (s *Server) Register(mux *http.ServeMux) {
	cop := http.NewCrossOriginProtection()
	for _, rt := range s.routes() {
		h := s.wrap(rt)
		if rt.pattern[:4] == "POST" {
			h = cop.Handler(h)
		}
		mux.Handle(rt.pattern, h)
	}
	mux.Handle("GET "+Prefix+"assets/{file}", s.assets)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	})
	// Browsers ask for it on pages that are not the dashboard's (an API
	// answer, a refusal): no icon, and no 404 in their consoles.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
}

// Handler returns a mux with only the dashboard (tests).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.Register(mux)
	return mux
}

// wrap checks the route's access, compresses the answer and renders an
// error as a page.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w)
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		var sess *session
		if rt.access != anyone {
			var err error
			if sess, err = s.sessions.check(r, s.cfg.Fleet); err != nil {
				s.refuse(w, r, err)
				return
			}
		}
		if rt.access == actor {
			if err := sess.mayAct(r); err != nil {
				s.log.Info("dashboard action refused", "path", r.URL.Path, "token", sess.name, "err", err)
				s.errorPage(w, r, sess, err)
				return
			}
		}
		if err := rt.h(w, r, sess); err != nil {
			s.errorPage(w, r, sess, err)
		}
	})
}

// refuse answers a request without a valid session: pages go to the login
// page (which says why), streams and actions get 401.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	clearCookie(w)
	next := r.URL.Path
	if r.URL.RawQuery != "" {
		next += "?" + r.URL.RawQuery
	}
	switch {
	case r.Header.Get("HX-Request") == "true": // htmx: the whole page goes to the login
		w.Header().Set("HX-Redirect", loginURL(next, err))
	case r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream":
		http.Redirect(w, r, loginURL(next, err), http.StatusSeeOther)
		return
	}
	http.Error(w, fmt.Sprintf("%s %s: %v: log in again at %slogin", r.Method, r.URL.Path, err, Prefix), http.StatusUnauthorized)
}

// setSecurityHeaders: no inline script or style, no framing, no referrer
// leaking machine names, and no caching of pages that show the fleet.
func setSecurityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Strict-Transport-Security", "max-age=31536000")
}
