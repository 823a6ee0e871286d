package imagewrite

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// resumingReader is the body of one HTTP GET that survives dropped
// connections: when the body ends early (an error, or EOF before the
// Content-Length), it reconnects with `Range: bytes=OFF-` and goes on from
// the byte it stopped at. Every byte it returns was hashed exactly once, in
// order, so the hash covers the stream as served however often it broke.
//
// The zstd decoder reads from this reader, so it never sees a break: resume
// works at the compressed byte offset without restarting decompression.
//
// A server that ignores Range (200 instead of 206) is still handled: the
// first OFF bytes of the new body are discarded. If-Range carries the first
// answer's ETag (or Last-Modified), so a server whose file changed answers
// 200 and the final sha256 check catches the mixed stream.
type resumingReader struct {
	ctx     context.Context
	client  *http.Client
	url     string
	hash    hash.Hash
	log     *slog.Logger
	retries int           // reconnects allowed without progress
	backoff time.Duration // first wait between reconnects

	body      io.ReadCloser
	off       atomic.Int64 // bytes returned (and hashed) so far; read by the writer for progress
	size      int64        // the full length, -1 while unknown
	validator string
	failures  int // consecutive reconnects without a byte
	resumes   int // reconnects done
}

func (r *resumingReader) Read(p []byte) (int, error) {
	for {
		if r.body == nil {
			if err := r.connect(); err != nil {
				return 0, err
			}
		}
		n, err := r.body.Read(p)
		if n > 0 {
			r.hash.Write(p[:n])
			r.off.Add(int64(n))
			r.failures = 0
		}
		switch {
		case err == nil:
			return n, nil
		case err == io.EOF && (r.size < 0 || r.off.Load() >= r.size):
			return n, io.EOF
		}
		// Early end or a broken connection: drop this body, reconnect on the next call.
		r.log.Warn("image stream broke, resuming", "offset", r.off.Load(), "size", r.size, "err", err)
		r.body.Close()
		r.body = nil
		if r.ctx.Err() != nil {
			return n, r.ctx.Err()
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (r *resumingReader) connect() error {
	var last error
	for r.failures <= r.retries {
		if r.failures > 0 || r.off.Load() > 0 {
			wait := r.backoff << min(r.failures, 6)
			select {
			case <-r.ctx.Done():
				return r.ctx.Err()
			case <-time.After(wait):
			}
		}
		r.failures++
		body, err := r.open()
		if err == nil {
			if r.off.Load() > 0 {
				r.resumes++
			}
			r.body = body
			return nil
		}
		last = err
		var pe *permanentError
		if errors.As(err, &pe) || r.ctx.Err() != nil {
			return err
		}
		r.log.Warn("image request failed", "offset", r.off.Load(), "attempt", r.failures, "err", err)
	}
	return fmt.Errorf("fetching %s at byte %d: giving up after %d attempts: %w", r.url, r.off.Load(), r.failures, last)
}

type permanentError struct{ error }

func (e *permanentError) Unwrap() error { return e.error }

func (r *resumingReader) open() (io.ReadCloser, error) {
	off := r.off.Load()
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, &permanentError{fmt.Errorf("image url %q: %w", r.url, err)}
	}
	// Ask for the bytes as stored: a transparently gunzipped body would not
	// match the pinned sha256.
	req.Header.Set("Accept-Encoding", "identity")
	if off > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
		if r.validator != "" {
			req.Header.Set("If-Range", r.validator)
		}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", r.url, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if off == 0 {
			r.size = resp.ContentLength // -1 when unknown
			r.validator = resp.Header.Get("ETag")
			if r.validator == "" || strings.HasPrefix(r.validator, "W/") {
				r.validator = resp.Header.Get("Last-Modified")
			}
			return resp.Body, nil
		}
		// Range ignored: skip what we already have.
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s ignored Range; skipping %d bytes: %w", r.url, off, err)
		}
		return resp.Body, nil
	case resp.StatusCode == http.StatusPartialContent && off > 0:
		start, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != off {
			resp.Body.Close()
			return nil, &permanentError{fmt.Errorf("GET %s with Range bytes=%d-: Content-Range %q does not start at %d",
				r.url, off, resp.Header.Get("Content-Range"), off)}
		}
		if total >= 0 {
			r.size = total
		}
		return resp.Body, nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: server answered %s", r.url, resp.Status)
	default:
		resp.Body.Close()
		return nil, &permanentError{fmt.Errorf("GET %s (from byte %d): server answered %s", r.url, off, resp.Status)}
	}
}

// parseContentRange reads "bytes START-END/TOTAL"; total is -1 for "*".
func parseContentRange(s string) (start, total int64, err error) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, fmt.Errorf("content-range %q: expected bytes START-END/TOTAL", s)
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, fmt.Errorf("content-range %q: no /TOTAL", s)
	}
	first, _, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, fmt.Errorf("content-range %q: no START-END", s)
	}
	if start, err = strconv.ParseInt(first, 10, 64); err != nil || start < 0 {
		return 0, 0, fmt.Errorf("content-range %q: bad start", s)
	}
	if tot == "*" {
		return start, -1, nil
	}
	if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total < 0 {
		return 0, 0, fmt.Errorf("content-range %q: bad total", s)
	}
	return start, total, nil
}

func (r *resumingReader) Close() error {
	if r.body != nil {
		err := r.body.Close()
		r.body = nil
		return err
	}
	return nil
}
