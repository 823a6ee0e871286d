package imagewrite

import (
	"io"
)

// prefetcher reads ahead from r in its own goroutine (the HTTP body and its
// sha256 run there), so the single-threaded zstd decoder that reads from it
// never waits on the network or the hash: fetch+hash, decode and write are
// three parallel stages.
type prefetcher struct {
	full chan block
	free chan []byte
	done chan struct{}
	exit chan struct{} // closed when the goroutine has returned
	cur  block
	off  int
}

type block struct {
	b   []byte
	err error
}

func newPrefetcher(r io.Reader, size, count int) *prefetcher {
	p := &prefetcher{full: make(chan block, count), free: make(chan []byte, count), done: make(chan struct{}), exit: make(chan struct{})}
	for i := 0; i < count; i++ {
		p.free <- make([]byte, size)
	}
	go func() {
		defer close(p.exit)
		defer close(p.full)
		for {
			var buf []byte
			select {
			case buf = <-p.free:
			case <-p.done:
				return
			}
			n, err := io.ReadAtLeast(r, buf[:cap(buf)], 1)
			select {
			case p.full <- block{b: buf[:n], err: err}:
			case <-p.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *prefetcher) Read(b []byte) (int, error) {
	for p.off == len(p.cur.b) {
		if p.cur.err != nil {
			return 0, p.cur.err
		}
		if p.cur.b != nil {
			p.free <- p.cur.b[:0]
		}
		blk, ok := <-p.full
		if !ok {
			return 0, io.ErrClosedPipe
		}
		p.cur, p.off = blk, 0
	}
	n := copy(b, p.cur.b[p.off:])
	p.off += n
	return n, nil
}

// Close stops the read-ahead goroutine and waits for it: cancel the
// reader's context first if it may be blocked in a read.
func (p *prefetcher) Close() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	<-p.exit
}
