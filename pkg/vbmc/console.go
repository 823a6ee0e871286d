package vbmc

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
)

// readTail returns the last limit bytes of the file at path; a file not
// there is empty. A tail that starts inside a line leaves that line out.
func readTail(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-limit, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	return data, nil
}

// splitLines splits console output into lines: CRLF and LF end a line, a
// lone CR (a terminal redrawing a line) is dropped, and a last line without
// its newline (still being written) is kept.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(data), "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.ReplaceAll(l, "\r", "")
	}
	return lines
}
