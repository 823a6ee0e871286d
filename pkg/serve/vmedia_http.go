package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/boot/httpboot"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
)

// Register adds GET /vmedia/TOKEN/ingot-agent.iso (and HEAD) to the boot
// listener's mux: the BMC fetches the CD there, whole or by Range, while
// the CD's job runs. Anything else, a CD of an ended job included, is 404.
// The first request of a CD's URL, and every request for an unknown one,
// counts against limit per client address (httpboot.Limit); a BMC reading
// a CD it has started is not throttled.
func (v *VirtualMedia) Register(mux *http.ServeMux, limit *ratelimit.Limiter) {
	mux.Handle("GET /vmedia/{token}/{file}", httpboot.Limit(limit, "vmedia", v.servedBefore, http.HandlerFunc(v.serveCD)))
}

// servedBefore: the request is for a CD already served once (a running
// job's): a BMC reading on.
func (v *VirtualMedia) servedBefore(r *http.Request) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.served[r.PathValue("token")]
}

func (v *VirtualMedia) serveCD(w http.ResponseWriter, r *http.Request) {
	tok, file := r.PathValue("token"), r.PathValue("file")
	if !tokenRE.MatchString(tok) || file != cdFile {
		http.NotFound(w, r)
		return
	}
	meta, err := v.meta(tok)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if !v.running(r.Context(), meta.Job) {
		v.mu.Lock()
		v.remove(tok)
		v.mu.Unlock()
		v.log.Info("boot CD of an ended job refused and deleted", "machine", meta.Machine, "job", meta.Job, "client", r.RemoteAddr)
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(filepath.Join(v.cfg.Dir, tok+".iso"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "boot CD unreadable", http.StatusInternalServerError)
		return
	}
	// A BMC reads a CD as the host asks, often by many small ranges: one
	// line a CD at Info, each request at Debug.
	v.mu.Lock()
	first := !v.served[tok]
	v.served[tok] = true
	v.mu.Unlock()
	log := v.log.With("machine", meta.Machine, "job", meta.Job, "client", r.RemoteAddr, "range", r.Header.Get("Range"))
	if first {
		log.Info("boot CD served", "bytes", fi.Size())
	} else {
		log.Debug("boot CD served")
	}
	if strings.Contains(r.Header.Get("Range"), ",") {
		// One range at a time: what BMCs ask, and no multipart answers.
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(fi.Size(), 10))
		http.Error(w, "Range: one range at a time", http.StatusRequestedRangeNotSatisfiable)
		return
	}
	// The whole CD at 1 MB/s or better, as artifacts are held to.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute + time.Duration(fi.Size()>>20)*time.Second))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, cdFile, fi.ModTime(), f)
}
