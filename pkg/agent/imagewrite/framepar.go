package imagewrite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Parallel decoding applies to streams of frames with a declared content
// size (an image compressed in independent chunks: pzstd, or any encoder
// that cuts frames): every frame's output offset is known before it is
// decoded, so frames decode on all cores and write at their offsets in any
// order. zstd's CLI makes one frame per file; such a stream is decoded by
// one goroutine instead.
const (
	maxFrameBytes   = 32 << 20  // a frame's compressed size, at most
	maxFrameContent = 256 << 20 // a frame's decompressed size, at most
	maxInFlight     = 768 << 20 // decompressed bytes held by workers at once
)

// frameLimit is the largest frame decoded whole: a quarter of the memory
// budget, so a small VM streams instead.
func frameLimit(o Options) int64 { return min(maxFrameContent, o.Memory/4) }

// defaultMemory is a quarter of MemAvailable, at most maxInFlight.
func defaultMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 256 << 20
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			if kib, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return min(maxInFlight, kib<<10/4)
			}
		}
	}
	return 256 << 20
}

// decodeFrames decodes first and the frames after it from r on
// GOMAXPROCS workers and writes each at its offset.
func decodeFrames(ctx context.Context, cancel context.CancelFunc, t *Target, o Options, r io.Reader,
	first frameInfo, rr *resumingReader, start time.Time) (int64, int64, error) {
	type job struct {
		data      []byte
		off, size int64
	}
	workers := min(max(runtime.GOMAXPROCS(0), 1), 16)
	jobs := make(chan job)
	budget := newBudget(o.Memory)
	// Frame and output buffers are recycled: allocating (and zeroing) a
	// fresh one per frame cost as much CPU as decoding.
	inBufs := make(chan []byte, workers+2)
	outBufs := make(chan []byte, workers+2)
	var mu sync.Mutex
	var zeros, written int64
	var ferr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if ferr == nil {
			ferr = err
			cancel()
		}
	}
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return ferr != nil }
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true), zstd.WithDecoderMaxMemory(maxFrameContent))
			if err != nil {
				fail(err)
				return
			}
			defer dec.Close()
			for j := range jobs {
				if !failed() {
					z, err := decodeAndWrite(dec, t, j.data, j.off, j.size, outBufs)
					mu.Lock()
					zeros += z
					written += j.size
					mu.Unlock()
					if err != nil {
						fail(err)
					}
				}
				budget.release(j.size)
				recycle(inBufs, j.data)
			}
		}()
	}
	var off int64
	var rerr error
	prog := newProgressor(o, start)
	f := first
	for {
		switch {
		case f.skippable:
		case f.contentSize < 0:
			rerr = fmt.Errorf("image %s: zstd frame at output byte %d has no content size; expected every frame to declare it once the first did", o.URL, off)
		default:
			if !budget.acquire(ctx, f.contentSize) {
				rerr = ctx.Err()
				break
			}
			jobs <- job{data: f.data, off: off, size: f.contentSize}
			off += f.contentSize
		}
		if rerr != nil || failed() {
			break
		}
		mu.Lock()
		w := written
		mu.Unlock()
		prog.report(rr.off.Load(), w, false)
		var err error
		f, err = readFrame(r, reuse(inBufs), maxFrameBytes)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, errNotZstd) {
				err = fmt.Errorf("data after the last zstd frame is not a frame")
			}
			rerr = fmt.Errorf("reading image %s at byte %d: %w", o.URL, rr.off.Load(), err)
			break
		}
		if f.contentSize > frameLimit(o) {
			rerr = fmt.Errorf("image %s: zstd frame of %d bytes decompressed, over the %d this agent buffers (Options.Memory/4)", o.URL, f.contentSize, frameLimit(o))
			break
		}
	}
	close(jobs)
	wg.Wait()
	prog.report(rr.off.Load(), written, true)
	if rerr == nil {
		rerr = ferr
	}
	return off, zeros, rerr
}

// decodeAndWrite decodes one frame into an aligned buffer of its declared
// size (from bufs when one is large enough) and writes it at off.
func decodeAndWrite(dec *zstd.Decoder, t *Target, frame []byte, off, size int64, bufs chan []byte) (int64, error) {
	out := reuse(bufs)
	if int64(cap(out)) < size {
		out = alignedBuffer(int(size))
	}
	defer func() { recycle(bufs, out) }()
	out, err := dec.DecodeAll(frame, out[:0])
	if err != nil {
		return 0, fmt.Errorf("decompressing the zstd frame for output byte %d: %w", off, err)
	}
	if int64(len(out)) != size {
		return 0, fmt.Errorf("zstd frame for output byte %d: %d bytes, its header says %d", off, len(out), size)
	}
	if len(out) == 0 {
		return 0, nil
	}
	return writeChunk(t, out, off)
}

// budget bounds the decompressed bytes in flight.
type budget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	free  int64
	limit int64
}

func newBudget(limit int64) *budget {
	b := &budget{free: limit, limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits for n bytes (a frame larger than the limit waits for all of
// it); false when ctx ended.
func (b *budget) acquire(ctx context.Context, n int64) bool {
	n = min(n, b.limit)
	stop := context.AfterFunc(ctx, func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n {
		if ctx.Err() != nil {
			return false
		}
		b.cond.Wait()
	}
	b.free -= n
	return true
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += min(n, b.limit)
	b.cond.Broadcast()
	b.mu.Unlock()
}

// reuse takes a recycled buffer, or nil.
func reuse(bufs chan []byte) []byte {
	select {
	case b := <-bufs:
		return b[:0]
	default:
		return nil
	}
}

// recycle offers b for reuse; a full pool drops it.
func recycle(bufs chan []byte, b []byte) {
	if cap(b) == 0 {
		return
	}
	select {
	case bufs <- b[:0]:
	default:
	}
}
