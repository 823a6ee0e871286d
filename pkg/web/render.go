package web

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages holds one template set per page: the layout, the partials and
// the page's own file.
type pages struct {
	sets map[string]*template.Template
}

func parsePages(as *assets) (*pages, error) {
	funcs := templateFuncs(as)
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	ps := &pages{sets: map[string]*template.Template{}}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || base == "partials" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", n)
		if err != nil {
			return nil, fmt.Errorf("web: parsing template %s: %w", n, err)
		}
		ps.sets[base] = t
	}
	return ps, nil
}

// layout is what every page's frame shows; Page is the page's own data.
type layout struct {
	Title   string
	Nav     string // the section the page belongs to
	Session *session
	Version string
	Page    any
}

// render executes a page into a buffer (so an error becomes an error
// page, not half a page) and sends it, gzip-compressed where the browser
// takes it.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, page string, sess *session, title string, data any) error {
	t := s.pages.sets[page]
	if t == nil {
		return fmt.Errorf("web: no page %q", page)
	}
	nav, _, _ := strings.Cut(page, "-")
	switch nav {
	case "machine":
		nav = "fleet"
	case "job":
		nav = "jobs"
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, layout{Title: title, Nav: nav, Session: sess, Version: s.cfg.Version, Page: data}); err != nil {
		return fmt.Errorf("rendering page %s: %w", page, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	writeCompressed(w, r, code, buf.Bytes())
	return nil
}

// writeCompressed sends body, gzip-compressed when the client accepts it
// and it is worth it.
func writeCompressed(w http.ResponseWriter, r *http.Request, code int, body []byte) {
	w.Header().Add("Vary", "Accept-Encoding")
	if len(body) < 1024 || !acceptsGzip(r) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(code)
		_, _ = w.Write(body)
		return
	}
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed) // pages are made per request: speed over a few KB
	_, _ = zw.Write(body)
	_ = zw.Close()
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Set("Content-Length", strconv.Itoa(zb.Len()))
	w.WriteHeader(code)
	_, _ = w.Write(zb.Bytes())
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}

// statusError is an error with the HTTP status it answers.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// statusOf maps the core's errors to HTTP statuses, as the API does.
func statusOf(err error) int {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.code
	case errors.Is(err, fleet.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, fleet.ErrInvalid), errors.Is(err, telemetry.ErrSilence):
		return http.StatusBadRequest
	case errors.Is(err, fleet.ErrExists), errors.Is(err, fleet.ErrConflict), errors.Is(err, fleet.ErrBusy), errors.Is(err, engine.ErrEnded):
		return http.StatusConflict
	case errors.Is(err, engine.ErrPreflight):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

type errorView struct {
	Code    int
	Status  string
	Message string
}

// errorPage renders err as a page with its status.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	code := statusOf(err)
	if code >= 500 {
		s.log.Error("dashboard", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	v := errorView{Code: code, Status: http.StatusText(code), Message: err.Error()}
	if rerr := s.render(w, r, code, "error", sess, http.StatusText(code), v); rerr != nil {
		http.Error(w, err.Error(), code)
	}
}

// templateFuncs are the helpers the templates use.
func templateFuncs(as *assets) template.FuncMap {
	return template.FuncMap{
		"asset":   as.url,
		"utc":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") + " UTC" },
		"iso":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"dur":     formatDuration,
		"secs":    func(f float64) string { return formatDuration(time.Duration(f * float64(time.Second))) },
		"bytes":   formatBytes,
		"num":     formatNumber,
		"money":   func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
		"pct":     func(a, b float64) float64 { return percent(a, b) },
		"fixed1":  func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
		"add":     func(a, b int) int { return a + b },
		"join":    strings.Join,
		"sub":     func(a, b int) int { return a - b },
		"nonzero": func(t time.Time) bool { return !t.IsZero() },
		"list":    func(xs ...string) []string { return xs },
		"machine": machineURL,
	}
}

func percent(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return min(100, max(0, 100*a/b))
}

// formatDuration rounds to what a person reads: 1h04m, 3m12s, 4.2s.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// formatNumber writes f with thousands separators and no decimals.
func formatNumber(f float64) string {
	s := strconv.FormatFloat(f, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
