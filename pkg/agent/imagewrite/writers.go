package imagewrite

import (
	"context"
	"sync"
)

// writerPool writes buffers at their offsets from a few goroutines. Writes
// to disjoint ranges may complete in any order; the first error cancels the
// whole write.
type writerPool struct {
	t      *Target
	work   chan job
	free   chan<- []byte
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	zeros int64
	err   error
}

type job struct {
	buf []byte
	n   int
	off int64
}

func newWriterPool(ctx context.Context, cancel context.CancelFunc, t *Target, n int, free chan<- []byte) *writerPool {
	p := &writerPool{t: t, work: make(chan job), free: free, cancel: cancel}
	for i := 0; i < n; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.work {
				p.do(j)
			}
		}()
	}
	return p
}

func (p *writerPool) do(j job) {
	defer func() { p.free <- j.buf }()
	if p.failed() {
		return
	}
	zeros, err := writeChunk(p.t, j.buf[:j.n], j.off)
	if err == nil && zeros < int64(j.n) {
		p.t.flushBehind(j.off, int64(j.n))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.zeros += zeros
	if err != nil && p.err == nil {
		p.err = err
		p.cancel()
	}
}

// write queues buf[:n] for offset off; buf goes back to free when written.
func (p *writerPool) write(buf []byte, n int, off int64) {
	p.work <- job{buf: buf, n: n, off: off}
}

func (p *writerPool) failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil
}

// wait ends the pool and returns the bytes handled as zero runs and the
// first error.
func (p *writerPool) wait() (int64, error) {
	close(p.work)
	p.wg.Wait()
	return p.zeros, p.err
}
