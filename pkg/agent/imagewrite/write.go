// Package imagewrite streams a golden image from HTTP onto a disk: fetch
// (resuming with Range after a dropped connection), optionally zstd
// decompress, sha256 of the stream as served verified at the end, large
// aligned writes (O_DIRECT where the target takes it), zero runs skipped only
// where the target reads back zeros (a file it created, BLKZEROOUT on a
// device that supports write-zeroes), progress at most every 500 ms, fsync
// (and BLKFLSBUF) before success.
//
// Stages run in parallel: a read-ahead goroutine does HTTP and sha256; a
// stream of zstd frames that declare their size (an image compressed in
// chunks) is decoded frame by frame on every core, each frame written at its
// offset; a single large frame (what zstd's CLI makes) is decoded by one
// goroutine feeding two writers.
//
// A sha256 mismatch returns a *ChecksumError and wipes the written image's
// first and last MiB so the machine cannot boot what was written.
package imagewrite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Options describe one image write.
type Options struct {
	URL    string
	SHA256 string // hex sha256 of the stream as served; required
	Format string // "raw" (default) or "raw.zst"
	Size   int64  // bytes of the stream as served; 0 = unknown

	Client        *http.Client   // default: http.Client without a timeout (the stream is long)
	Progress      func(Progress) // called from the writing goroutine
	ProgressEvery time.Duration  // default 500 ms; Progress is never called more often
	Retries       int            // reconnects in a row without a byte; default 10
	RetryBackoff  time.Duration  // first wait between reconnects, doubled; default 250 ms
	BufferSize    int            // bytes per write; default 4 MiB (a multiple of 64 KiB)
	// Memory bounds the decompressed bytes parallel frame decoding holds;
	// default a quarter of MemAvailable, at most 768 MiB. Frames larger than
	// a quarter of it are streamed instead.
	Memory int64
	Logger *slog.Logger     // default: discard
	now    func() time.Time // tests
}

// Progress is one progress report.
type Progress struct {
	Received int64         // bytes of the stream as served
	Total    int64         // Options.Size (0 if unknown)
	Written  int64         // bytes of the image placed on the target (zero runs included)
	RateBps  float64       // received bytes per second since the previous report
	Elapsed  time.Duration // since the start
}

// Result describes a verified write.
type Result struct {
	SHA256    string
	Received  int64 // bytes of the stream as served
	Written   int64 // image bytes (the target's new length for a file)
	ZeroBytes int64 // bytes of zero runs not written as data (skipped or BLKZEROOUT)
	Resumes   int   // reconnections with Range
	Elapsed   time.Duration
}

// ChecksumError is a sha256 mismatch of the stream as served.
type ChecksumError struct {
	URL      string
	Expected string
	Found    string
	Bytes    int64
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("image %s: sha256 mismatch: expected %s, found %s over %d bytes", e.URL, e.Expected, e.Found, e.Bytes)
}

type chunk struct {
	buf      []byte
	n        int
	received int64
	err      error // io.EOF at the end
}

// Write streams the image described by o onto t. It returns a Result only
// when every byte was written, the sha256 matched and the target was synced.
func Write(ctx context.Context, t *Target, o Options) (Result, error) {
	o = o.withDefaults()
	if len(o.SHA256) != 64 {
		return Result{}, fmt.Errorf("image %s: expected sha256 of 64 hex digits, got %q", o.URL, o.SHA256)
	}
	start := o.now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := sha256.New()
	rr := &resumingReader{ctx: ctx, client: o.Client, url: o.URL, hash: h, log: o.Logger,
		retries: o.Retries, backoff: o.RetryBackoff, size: -1}
	var pf *prefetcher
	defer func() {
		cancel() // unblocks a read in progress
		if pf != nil {
			pf.Close()
		}
		rr.Close()
	}()

	var raw io.Reader = rr
	var off, zeros int64
	var rerr error
	switch o.Format {
	case "", "raw":
		off, zeros, rerr = streamChunks(ctx, cancel, t, o, rr, rr, start)
	case "raw.zst":
		// A read-ahead goroutine does HTTP and sha256. The frames' own
		// xxhash is skipped: the sha256 of the stream as served covers it.
		pf = newPrefetcher(rr, 1<<20, 4)
		raw = pf
		rec := &recorder{r: pf, buf: make([]byte, 0, maxFrameBytes+1<<16)}
		first, ferr := readFrame(rec, nil, maxFrameBytes)
		if ferr == nil && !first.skippable && first.contentSize >= 0 && first.contentSize <= frameLimit(o) {
			// Frames of known size: decoded in parallel (decodeFrames).
			off, zeros, rerr = decodeFrames(ctx, cancel, t, o, pf, first, rr, start)
			break
		}
		// One large frame (zstd's CLI makes one per file): one decoder
		// goroutine, measured here to use less CPU and time than its async
		// mode, reading what was looked at first and then the rest.
		dec, err := zstd.NewReader(io.MultiReader(bytes.NewReader(rec.buf), pf), zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true))
		if err != nil {
			return Result{}, fmt.Errorf("starting zstd decoder: %w", err)
		}
		rec.buf = nil
		off, zeros, rerr = streamChunks(ctx, cancel, t, o, dec, rr, start)
		dec.Close()
	default:
		return Result{}, fmt.Errorf("image %s: format %q: expected raw or raw.zst", o.URL, o.Format)
	}
	res := Result{ZeroBytes: zeros}
	if rerr == nil && ctx.Err() != nil {
		rerr = ctx.Err()
	}
	if rerr == nil {
		// The decoder may stop at the end of the last frame: hash what follows too.
		if _, err := io.Copy(io.Discard, raw); err != nil {
			rerr = fmt.Errorf("reading the end of image %s: %w", o.URL, err)
		}
	}
	res.Received, res.Written, res.Resumes = rr.off.Load(), off, rr.resumes
	if rerr == nil {
		res.SHA256 = hex.EncodeToString(h.Sum(nil))
		if res.SHA256 != o.SHA256 {
			rerr = &ChecksumError{URL: o.URL, Expected: o.SHA256, Found: res.SHA256, Bytes: res.Received}
		} else if o.Size > 0 && res.Received != o.Size {
			rerr = fmt.Errorf("image %s: expected %d bytes as served, received %d", o.URL, o.Size, res.Received)
		}
	}
	if rerr != nil {
		if err := t.invalidate(off); err != nil {
			o.Logger.Error("could not wipe the partly written image", "target", t.Path, "err", err)
		}
		return res, rerr
	}
	if err := t.finish(off); err != nil {
		return res, err
	}
	res.Elapsed = o.now().Sub(start)
	return res, nil
}

// writeChunk writes b at off, handing 64 KiB-aligned zero runs to the target's
// zero mode; it returns how many bytes were handled as zero runs.
func writeChunk(t *Target, b []byte, off int64) (int64, error) {
	var zeros int64
	pos := 0
	for pos < len(b) {
		// A run of data chunks, then a run of zero chunks.
		end := pos
		for end < len(b) && !isZero(b[end:min(end+zeroChunk, len(b))]) {
			end = min(end+zeroChunk, len(b))
		}
		if end > pos {
			if err := t.writeAt(b[pos:end], off+int64(pos)); err != nil {
				return zeros, err
			}
			pos = end
		}
		for end < len(b) && isZero(b[end:min(end+zeroChunk, len(b))]) {
			end = min(end+zeroChunk, len(b))
		}
		if end > pos {
			ok, err := t.zeroRange(off+int64(pos), int64(end-pos))
			if !ok || err != nil {
				// Unknown contents or BLKZEROOUT refused (e.g. unaligned tail): write the zeros.
				if err := t.writeAt(b[pos:end], off+int64(pos)); err != nil {
					return zeros, err
				}
			} else {
				zeros += int64(end - pos)
			}
			pos = end
		}
	}
	return zeros, nil
}

func (o Options) withDefaults() Options {
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 500 * time.Millisecond
	}
	if o.Retries <= 0 {
		o.Retries = 10
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 250 * time.Millisecond
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 4 << 20
	}
	o.BufferSize = (o.BufferSize + zeroChunk - 1) / zeroChunk * zeroChunk
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Memory <= 0 {
		o.Memory = defaultMemory()
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o
}

// streamChunks reads src in BufferSize chunks (its own goroutine) and hands
// them to writers at increasing offsets. It returns the image length, the
// bytes handled as zero runs and the first error.
func streamChunks(ctx context.Context, cancel context.CancelFunc, t *Target, o Options, src io.Reader, rr *resumingReader, start time.Time) (int64, int64, error) {
	// With O_DIRECT two writers keep two requests in flight (measured here:
	// 1 GiB in 1.85 s instead of 2.7 s); buffered writes use one, in order,
	// for flush-behind.
	writers := 1
	if t.Direct {
		writers = 2
	}
	nbuf := 2 + 2*writers
	free := make(chan []byte, nbuf)
	for i := 0; i < nbuf; i++ {
		free <- alignedBuffer(o.BufferSize)
	}
	full := make(chan chunk, nbuf)
	go func() {
		defer close(full)
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			n, err := io.ReadFull(src, buf)
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			full <- chunk{buf: buf, n: n, received: rr.off.Load(), err: err}
			if err != nil {
				return
			}
		}
	}()
	wp := newWriterPool(ctx, cancel, t, writers, free)
	var off int64
	var rerr error
	prog := newProgressor(o, start)
	for c := range full {
		if c.n > 0 {
			wp.write(c.buf, c.n, off)
			off += int64(c.n)
		} else {
			free <- c.buf
		}
		prog.report(c.received, off, c.err != nil)
		if c.err != nil {
			if c.err != io.EOF {
				rerr = fmt.Errorf("reading image %s (format %q) at byte %d (%d written): %w", o.URL, o.Format, c.received, off, c.err)
			}
			break
		}
		if wp.failed() {
			break
		}
	}
	zeros, werr := wp.wait()
	if werr != nil {
		rerr = werr
	}
	for range full { // let the reader goroutine end
	}
	return off, zeros, rerr
}

// progressor calls Options.Progress at most every ProgressEvery (and at the end).
type progressor struct {
	o      Options
	start  time.Time
	lastT  time.Time
	lastRx int64
}

func newProgressor(o Options, start time.Time) *progressor {
	return &progressor{o: o, start: start, lastT: start}
}

func (p *progressor) report(received, written int64, final bool) {
	if p.o.Progress == nil {
		return
	}
	now := p.o.now()
	if now.Sub(p.lastT) < p.o.ProgressEvery && !final {
		return
	}
	rate := 0.0
	if dt := now.Sub(p.lastT).Seconds(); dt > 0 {
		rate = float64(received-p.lastRx) / dt
	}
	p.o.Progress(Progress{Received: received, Total: p.o.Size, Written: written, RateBps: rate, Elapsed: now.Sub(p.start)})
	p.lastT, p.lastRx = now, received
}

// recorder keeps what was read through it, so a stream looked at can be
// replayed.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}
