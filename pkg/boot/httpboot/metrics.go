package httpboot

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	scripts  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingot_http_requests_total", Help: "HTTP boot requests by route and status code.",
		}, []string{"route", "code"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingot_http_response_bytes_total", Help: "HTTP boot response body bytes by route.",
		}, []string{"route"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ingot_http_request_duration_seconds", Help: "HTTP boot request duration by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"route"}),
		scripts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingot_ipxe_scripts_total", Help: "iPXE scripts served by action: agent, discovery, local, exit, error.",
		}, []string{"action"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.bytes, m.duration, m.scripts)
	}
	return m
}

// instrument counts requests, bytes and durations of one route.
func (m *metrics) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cw := &countingWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(cw, r)
		m.requests.WithLabelValues(route, strconv.Itoa(cw.code)).Inc()
		m.bytes.WithLabelValues(route).Add(float64(cw.n))
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// countingWriter counts body bytes. It keeps io.ReaderFrom so that
// http.ServeContent over an *os.File still uses sendfile.
type countingWriter struct {
	http.ResponseWriter
	code int
	n    int64
}

func (c *countingWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err := rf.ReadFrom(r)
		c.n += n
		return n, err
	}
	n, err := io.Copy(struct{ io.Writer }{c.ResponseWriter}, r)
	c.n += n
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
