package storm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TFTP opcodes (RFC 1350, OACK RFC 2347).
const (
	tftpRRQ   = 1
	tftpDATA  = 3
	tftpACK   = 4
	tftpERROR = 5
	tftpOACK  = 6
)

// tftpPacket is one packet the server sent, parsed.
type tftpPacket struct {
	op    uint16
	block uint16            // DATA, ACK
	data  []byte            // DATA (aliases the read buffer)
	opts  map[string]string // OACK, names lower-cased
	code  uint16            // ERROR
	msg   string            // ERROR
}

// parseTFTP reads a packet from the server; anything malformed is an error
// naming what was wrong.
func parseTFTP(b []byte) (tftpPacket, error) {
	if len(b) < 2 {
		return tftpPacket{}, fmt.Errorf("tftp packet of %d bytes: expected an opcode", len(b))
	}
	p := tftpPacket{op: binary.BigEndian.Uint16(b)}
	switch p.op {
	case tftpDATA, tftpACK:
		if len(b) < 4 {
			return p, fmt.Errorf("tftp opcode %d in %d bytes: expected a block number", p.op, len(b))
		}
		p.block = binary.BigEndian.Uint16(b[2:])
		p.data = b[4:]
	case tftpERROR:
		if len(b) < 4 {
			return p, fmt.Errorf("tftp ERROR in %d bytes: expected an error code", len(b))
		}
		p.code = binary.BigEndian.Uint16(b[2:])
		msg, _, _ := bytes.Cut(b[4:], []byte{0})
		p.msg = string(msg)
	case tftpOACK:
		opts, err := parseOptions(b[2:])
		if err != nil {
			return p, fmt.Errorf("tftp OACK: %w", err)
		}
		p.opts = opts
	default:
		return p, fmt.Errorf("tftp opcode %d: expected DATA, ERROR or OACK from a server", p.op)
	}
	return p, nil
}

// parseOptions reads NUL-terminated name/value pairs (RFC 2347).
func parseOptions(b []byte) (map[string]string, error) {
	opts := map[string]string{}
	for len(b) > 0 {
		parts := bytes.SplitN(b, []byte{0}, 3)
		if len(parts) < 3 {
			return nil, errors.New("option name or value not NUL-terminated")
		}
		name := strings.ToLower(string(parts[0]))
		if name == "" {
			return nil, errors.New("empty option name")
		}
		if _, dup := opts[name]; dup {
			return nil, fmt.Errorf("option %q twice", name)
		}
		opts[name] = string(parts[1])
		b = parts[2]
	}
	return opts, nil
}

// rrq is a read request for name in octet mode with options, in order.
func rrq(name string, opts [][2]string) []byte {
	b := binary.BigEndian.AppendUint16(nil, tftpRRQ)
	b = append(append(b, name...), 0)
	b = append(append(b, "octet"...), 0)
	for _, o := range opts {
		b = append(append(b, o[0]...), 0)
		b = append(append(b, o[1]...), 0)
	}
	return b
}

func tftpAck(block uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tftpACK), block)
}

func tftpError(code uint16, msg string) []byte {
	b := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tftpERROR), code)
	return append(append(b, msg...), 0)
}

// oackTerms checks an OACK against what was asked: the server may lower
// blksize and windowsize (never raise them), and answers tsize with the
// file's size. It returns the block size, the window (1: lock step) and
// the size (-1: not told).
func oackTerms(opts map[string]string, askedBlk, askedWindow int) (blksize, window int, tsize int64, err error) {
	blksize, window, tsize = 512, 1, -1
	for name, v := range opts {
		switch name {
		case "blksize":
			n, err := strconv.Atoi(v)
			if err != nil || n < 8 || n > askedBlk {
				return 0, 0, 0, fmt.Errorf("OACK blksize %q: expected 8..%d (what was asked)", v, askedBlk)
			}
			blksize = n
		case "windowsize":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > askedWindow {
				return 0, 0, 0, fmt.Errorf("OACK windowsize %q: expected 1..%d (what was asked)", v, askedWindow)
			}
			window = n
		case "tsize":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, 0, 0, fmt.Errorf("OACK tsize %q: expected a size in bytes", v)
			}
			tsize = n
		default:
			return 0, 0, 0, fmt.Errorf("OACK option %q was not asked for", name)
		}
	}
	return blksize, window, tsize, nil
}
