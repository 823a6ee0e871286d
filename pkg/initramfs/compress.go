package initramfs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Compression names how an initramfs is compressed. Debian's 6.1 kernel
// unpacks all three.
type Compression string

// The supported compressions.
const (
	None Compression = "none"
	Gzip Compression = "gzip"
	Zstd Compression = "zstd"
)

// ParseCompression checks a compression name; "" means gzip.
func ParseCompression(s string) (Compression, error) {
	switch Compression(s) {
	case "", Gzip:
		return Gzip, nil
	case None, Zstd:
		return Compression(s), nil
	}
	return "", fmt.Errorf("compression %q: expected none, gzip or zstd", s)
}

// Compress writes the compressed form of raw to w. Output is deterministic:
// gzip with an empty header (no name, mtime 0) at the default level (6); zstd
// single-threaded at the default level.
func Compress(w io.Writer, raw []byte, c Compression) error {
	switch c {
	case None:
		_, err := w.Write(raw)
		return err
	case Gzip, "":
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		if _, err := zw.Write(raw); err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		return zw.Close()
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
		if err != nil {
			return err
		}
		if _, err := zw.Write(raw); err != nil {
			zw.Close()
			return fmt.Errorf("zstd: %w", err)
		}
		return zw.Close()
	}
	return fmt.Errorf("compression %q: expected none, gzip or zstd", c)
}

// Decompress returns a reader of the cpio stream in r, recognising gzip and
// zstd by their magic bytes; anything else is returned as is.
func Decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading gzip header: %w", err)
		}
		return zr, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("reading zstd header: %w", err)
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}
