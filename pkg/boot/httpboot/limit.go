package httpboot

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/ratelimit"
)

// The public rate limit. Every route of the boot listener answers without
// a credential, and some are costly (/ipxe issues boot credentials, /uki/
// assembles an EFI application per request): each request counts against
// its client address's bucket in Config.Limit, and over it the answer is
// 429 with Retry-After. What continues a download the client has started
// is not counted: a firmware or agent resuming a kernel or an image by
// Range, a BMC reading a virtual-media CD by many small ranges. Counted in
// requests, not bytes: a download's size is bounded by its write deadline
// (downloadRate), not here.

// Limit wraps next so that each request to route counts against its
// client address in l, except those exempt says continue a download
// (exempt nil: every request counts). l nil: no limit. Routes served
// beside these on the boot listener (pkg/serve's /vmedia/) wrap theirs
// with it too.
func Limit(l *ratelimit.Limiter, route string, exempt func(*http.Request) bool, next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt != nil && exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		key := clientKey(r)
		if ok, wait := l.Allow(key); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			http.Error(w, fmt.Sprintf("%s: too many requests from %s; retry in %s", route, key, wait.Round(time.Millisecond)), http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Ranged is Limit's exemption for downloads: a request with a Range header
// continues one (a resume after a dropped connection, a BMC reading a CD).
// Its first request, without Range, counts.
func Ranged(r *http.Request) bool { return r.Header.Get("Range") != "" }

// resumes is /artifacts/'s exemption: a Range request for an artifact
// that is in the store continues its download. A Range request for one
// that is not counts, so that probing names or hashes is limited too.
func (h *Handler) resumes(r *http.Request) bool {
	if !Ranged(r) {
		return false
	}
	if sha := r.PathValue("sha"); sha != "" {
		return h.cfg.Artifacts.Has(sha)
	}
	_, err := h.cfg.Artifacts.Resolve(r.PathValue("name"))
	return err == nil
}

// clientKey is the address a request came from, IPv4-mapped IPv6
// addresses as IPv4, so both spellings share one bucket.
func clientKey(r *http.Request) string {
	if a, err := remoteAddr(r); err == nil {
		return a.String()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
