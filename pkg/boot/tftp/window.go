package tftp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// sendWindows sends r in windows of window blocks (RFC 7440), after oack,
// which always carries the windowsize (it is only agreed there): the whole
// window goes out, then the client's ACK of block k says it has every block
// up to k, and the next window starts at k+1, which resends whatever it
// lost. An ACK that moves nothing (a duplicate, or one older than the
// window) is ignored, as in lock step (RFC 1123 4.2.3.1); when no ACK
// moves the window within Timeout, the window is sent again, Retries
// times. EDK2 asks windowsize 4, so UEFI PXE takes a quarter of the round
// trips of lock step, which counts when a boot storm keeps the server and
// the network busy and every round trip waits.
func (x *sender) sendWindows(r io.Reader, blksize, window int, oack []byte) (n int64, err error) {
	if err := x.exchange(oack, 0); err != nil {
		return 0, err
	}
	w := &windows{x: x, r: r, blksize: blksize, base: 1}
	free := make([][]byte, window)
	for i := range free {
		free[i] = make([]byte, 4+blksize)
		binary.BigEndian.PutUint16(free[i], opDATA)
	}
	for {
		for len(w.out) < window && !w.eof {
			b := free[len(free)-1]
			free = free[:len(free)-1]
			if err := w.fill(b); err != nil {
				return n, err
			}
		}
		if len(w.out) == 0 {
			return n, nil
		}
		acked, err := w.round()
		if err != nil {
			return n, err
		}
		for _, b := range w.out[:acked] {
			n += int64(len(b) - 4)
			free = append(free, b[:cap(b)])
		}
		w.out = w.out[acked:]
		w.base += uint16(acked)
	}
}

// windows is the state of a windowed transfer: out holds the blocks sent
// and not yet acknowledged, base's first.
type windows struct {
	x       *sender
	r       io.Reader
	blksize int
	base    uint16
	out     [][]byte // DATA packets
	eof     bool     // the short last block has been read
}

// fill reads the next block into b and queues it.
func (w *windows) fill(b []byte) error {
	block := w.base + uint16(len(w.out)) // wraps from 65535 to 0, as in lock step
	l, err := io.ReadFull(w.r, b[4:4+w.blksize])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		w.x.conn.Write(appendError(nil, codeUndefined, "read error"))
		return fmt.Errorf("reading block %d: %w", block, err)
	}
	binary.BigEndian.PutUint16(b[2:], block)
	w.out = append(w.out, b[:4+l])
	w.eof = l < w.blksize
	return nil
}

// round sends the window, then waits for an ACK that moves it, resending
// the window on each timeout. It returns how many blocks were acknowledged.
//
// An ACK of the block before the window (base-1) moves nothing, but it is
// how a client says it lost the window's first block (RFC 7440 §4: it ACKs
// the last block it has in order): the window goes out again at once,
// once; a second such ACK before the next timeout is taken for a duplicate
// and ignored, so duplicate ACKs draw at most one window each timeout.
func (w *windows) round() (int, error) {
	early := true // a resend on the client's word is allowed
	for i := 0; i < len(w.x.rest); {
		for _, b := range w.out {
			if _, err := w.x.conn.Write(b); err != nil {
				if refusedQueued(w.x.conn, err) {
					break // the client closed after its last packets: read them
				}
				return 0, fmt.Errorf("sending block %d: %w", binary.BigEndian.Uint16(b[2:]), err)
			}
		}
		acked, gap, err := w.await(time.Now().Add(w.x.rest[i]), early)
		switch {
		case acked > 0 || err != nil:
			return acked, err
		case gap:
			early = false
		default: // the timeout
			i, early = i+1, true
		}
	}
	return 0, fmt.Errorf("no ACK of blocks %d-%d after %d sends", w.base, w.base+uint16(len(w.out))-1, len(w.x.rest))
}

// await reads until an ACK of a block in the window (it returns how many
// blocks that covers), an ACK of the block before it when gap may end the
// wait, an ERROR, or deadline (0, false, nil).
func (w *windows) await(deadline time.Time, gap bool) (int, bool, error) {
	x := w.x
	if err := x.conn.SetReadDeadline(deadline); err != nil {
		return 0, false, fmt.Errorf("waiting for an ACK from block %d: %w", w.base, err)
	}
	for {
		n, err := read(x.conn, x.in, deadline)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("waiting for an ACK from block %d: %w", w.base, err)
		}
		switch r := parseReply(x.in[:n]); {
		case r.op == opACK && int(r.block-w.base) < len(w.out):
			return int(r.block-w.base) + 1, false, nil
		case r.op == opACK && r.block == w.base-1 && gap:
			return 0, true, nil
		case r.op == opERROR:
			return 0, false, &clientAbort{r.code, r.msg}
		}
	}
}
