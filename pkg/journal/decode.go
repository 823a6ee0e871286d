package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Decode parses one entry of the native protocol into its fields (a field
// given twice keeps both values), as journald reads it: what a fake
// journald in a test needs.
func Decode(b []byte) (map[string][]string, error) {
	out := map[string][]string{}
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			return nil, errors.New("journal entry: a field without its newline")
		}
		line := b[:nl]
		if name, value, ok := bytes.Cut(line, []byte("=")); ok {
			out[string(name)] = append(out[string(name)], string(value))
			b = b[nl+1:]
			continue
		}
		rest := b[nl+1:]
		if len(rest) < 8 {
			return nil, fmt.Errorf("journal entry: field %q: no 8-byte length after its name", line)
		}
		size := binary.LittleEndian.Uint64(rest)
		if size > uint64(len(rest)-8) || uint64(len(rest)-8)-size < 1 || rest[8+size] != '\n' {
			return nil, fmt.Errorf("journal entry: field %q: %d bytes announced, %d left", line, size, len(rest)-8)
		}
		out[string(line)] = append(out[string(line)], string(rest[8:8+size]))
		b = rest[8+size+1:]
	}
	return out, nil
}
