package serve

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// serveToBMC answers a BMC's download of f (a boot CD, a firmware
// package), whole or by Range: one range at a time (what BMCs ask; no
// multipart answers), within a deadline of a minute plus a second a MiB
// (1 MB/s or better, as artifacts are held to), never cached.
func serveToBMC(w http.ResponseWriter, r *http.Request, name string, f *os.File, fi os.FileInfo) {
	if strings.Contains(r.Header.Get("Range"), ",") {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(fi.Size(), 10))
		http.Error(w, "Range: one range at a time", http.StatusRequestedRangeNotSatisfiable)
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute + time.Duration(fi.Size()>>20)*time.Second))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, name, fi.ModTime(), f)
}
