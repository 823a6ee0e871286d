package imagewrite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// zstd frame layout (RFC 8878 section 3.1), enough to cut a stream into
// frames without decoding them.
const (
	zstdMagic          = 0xFD2FB528
	skippableMagicMask = 0xFFFFFFF0
	skippableMagic     = 0x184D2A50
)

// frameInfo describes one frame found by readFrame.
type frameInfo struct {
	data        []byte // the whole frame, header to checksum
	contentSize int64  // Frame_Content_Size; -1 when the frame does not say
	skippable   bool
}

// errNotZstd is returned when the stream does not start with a zstd frame.
var errNotZstd = errors.New("not a zstd frame")

// readFrame reads exactly one frame (or skippable frame) from r into buf
// (reused when large enough). It returns io.EOF at a clean end of stream.
// maxSize bounds the frame's compressed size; a larger frame is an error
// the caller turns into the streaming fallback.
func readFrame(r io.Reader, buf []byte, maxSize int) (frameInfo, error) {
	buf = buf[:0]
	grow := func(n int) ([]byte, error) {
		if len(buf)+n > maxSize {
			return nil, fmt.Errorf("zstd frame over %d bytes", maxSize)
		}
		start := len(buf)
		if cap(buf)-start < n {
			// Grow without zeroing on every block: recycled buffers rarely grow.
			nb := make([]byte, start, 2*cap(buf)+n)
			copy(nb, buf)
			buf = nb
		}
		buf = buf[:start+n]
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			if err == io.EOF && start == 0 {
				return nil, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return buf[start:], nil
	}
	m, err := grow(4)
	if err != nil {
		return frameInfo{}, err
	}
	magic := binary.LittleEndian.Uint32(m)
	if magic&skippableMagicMask == skippableMagic {
		sz, err := grow(4)
		if err != nil {
			return frameInfo{}, err
		}
		if _, err := grow(int(binary.LittleEndian.Uint32(sz))); err != nil {
			return frameInfo{}, err
		}
		return frameInfo{data: buf, contentSize: 0, skippable: true}, nil
	}
	if magic != zstdMagic {
		return frameInfo{}, errNotZstd
	}
	d, err := grow(1)
	if err != nil {
		return frameInfo{}, err
	}
	fhd := d[0]
	fcsFlag, single, checksum, dictFlag := fhd>>6, fhd&0x20 != 0, fhd&0x04 != 0, fhd&0x03
	n := 0
	if !single {
		n++ // Window_Descriptor
	}
	n += []int{0, 1, 2, 4}[dictFlag]
	fcsLen := []int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && single {
		fcsLen = 1
	}
	hdr, err := grow(n + fcsLen)
	if err != nil {
		return frameInfo{}, err
	}
	size := int64(-1)
	f := hdr[n:]
	switch fcsLen {
	case 1:
		size = int64(f[0])
	case 2:
		size = int64(binary.LittleEndian.Uint16(f)) + 256
	case 4:
		size = int64(binary.LittleEndian.Uint32(f))
	case 8:
		size = int64(binary.LittleEndian.Uint64(f))
	}
	for {
		bh, err := grow(3)
		if err != nil {
			return frameInfo{}, err
		}
		h := uint32(bh[0]) | uint32(bh[1])<<8 | uint32(bh[2])<<16
		last, typ, bsize := h&1 != 0, (h>>1)&3, int(h>>3)
		switch typ {
		case 1: // RLE: one byte repeated bsize times
			bsize = 1
		case 3:
			return frameInfo{}, fmt.Errorf("zstd block of reserved type 3")
		}
		if _, err := grow(bsize); err != nil {
			return frameInfo{}, err
		}
		if last {
			break
		}
	}
	if checksum {
		if _, err := grow(4); err != nil {
			return frameInfo{}, err
		}
	}
	return frameInfo{data: buf, contentSize: size}, nil
}
