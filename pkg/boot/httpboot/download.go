package httpboot

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRanges is how many ranges one Range header may ask for: enough for
// any downloader, few enough that a header of 60,000 ranges cannot make a
// multi-megabyte answer out of a small file.
const maxRanges = 16

// downloadRate is the slowest a download may go before its connection is
// cut: the write deadline is a minute plus the file's size at this rate,
// in place of the server's (short) write timeout.
const downloadRate = 1 << 20 // bytes per second

// serveFile serves a file with Range, HEAD and conditional requests
// (http.ServeContent, sendfile underneath), after refusing Range headers
// that ask for nothing (bytes=-0) or too many ranges, and with a write
// deadline sized to the file.
func serveFile(w http.ResponseWriter, r *http.Request, f io.ReadSeeker, size int64, mod time.Time) {
	if why := badRange(r.Header.Get("Range")); why != "" {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		http.Error(w, "Range: "+why, http.StatusRequestedRangeNotSatisfiable)
		return
	}
	deadline := time.Now().Add(time.Minute + time.Duration(size/downloadRate)*time.Second)
	_ = http.NewResponseController(w).SetWriteDeadline(deadline) // not every writer supports it (tests)
	http.ServeContent(w, r, "", mod, f)
}

// badRange says why a Range header is refused, "" when it is not.
func badRange(h string) string {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok {
		return ""
	}
	parts := strings.Split(spec, ",")
	if len(parts) > maxRanges {
		return "at most " + strconv.Itoa(maxRanges) + " ranges"
	}
	for _, p := range parts {
		if strings.TrimSpace(p) == "-0" {
			return "a suffix of 0 bytes selects nothing"
		}
	}
	return ""
}
