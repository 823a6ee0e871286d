package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TFTP opcodes (RFC 1350 section 5, RFC 2347).
const (
	opRRQ   = 1
	opWRQ   = 2
	opDATA  = 3
	opACK   = 4
	opERROR = 5
	opOACK  = 6
)

// TFTP error codes (RFC 1350 appendix, RFC 2347).
const (
	codeUndefined = 0
	codeNotFound  = 1
	codeAccess    = 2
)

const (
	// maxRequest bounds the requests read on the listening socket. RFC 2347
	// limits a request to 512 bytes; longer ones are dropped.
	maxRequest = 512
	// defaultBlock is the RFC 1350 block size, used unless blksize is agreed.
	defaultBlock = 512
	// blksize limits from RFC 2348.
	minBlock, maxBlock = 8, 65464
	// maxWindow caps the windowsize agreed (RFC 7440 allows 65535): EDK2
	// asks 4; a window of 16 blocks of 1468 bytes is 23 KB in flight.
	maxWindow = 16
)

// errMalformed marks a datagram on the listening socket that is not a
// well-formed RRQ or WRQ; it is dropped without an answer.
var errMalformed = errors.New("not a TFTP request")

// request is a parsed RRQ or WRQ.
type request struct {
	op      uint16
	name    string
	mode    string
	options []option // in the order the client sent them
}

type option struct{ name, value string }

// parseRequest reads an RRQ or WRQ: opcode, then NUL-terminated filename,
// mode and option name/value pairs (RFC 1350 section 5, RFC 2347). It is
// lenient where clients differ: a missing final NUL, trailing padding and a
// dangling option name are ignored.
func parseRequest(b []byte) (request, error) {
	if len(b) < 4 {
		return request{}, fmt.Errorf("%w: %d bytes", errMalformed, len(b))
	}
	if len(b) > maxRequest {
		return request{}, fmt.Errorf("%w: %d bytes, over the %d RFC 2347 allows", errMalformed, len(b), maxRequest)
	}
	op := binary.BigEndian.Uint16(b)
	if op != opRRQ && op != opWRQ {
		return request{}, fmt.Errorf("%w: opcode %d", errMalformed, op)
	}
	f := bytes.Split(bytes.TrimSuffix(b[2:], []byte{0}), []byte{0})
	if len(f) < 2 || len(f[0]) == 0 || len(f[1]) == 0 {
		return request{}, fmt.Errorf("%w: no filename and mode", errMalformed)
	}
	r := request{op: op, name: string(f[0]), mode: string(f[1])}
	for i := 2; i+1 < len(f); i += 2 {
		if len(f[i]) > 0 {
			r.options = append(r.options, option{string(f[i]), string(f[i+1])})
		}
	}
	return r, nil
}

// negotiated is the server's answer to a request's options.
type negotiated struct {
	blksize int
	window  int      // blocks sent before an ACK is awaited; 0: lock step
	oack    []option // options acknowledged; none: the transfer starts with DATA 1
}

// negotiate answers the client's options (RFC 2347): blksize (RFC 2348,
// 8..65464) gets min(asked, limit); tsize (RFC 2349) gets the file's size,
// in octet mode only, where that size is exact (size < 0: unknown, not
// answered); windowsize (RFC 7440, 1..65535) gets min(asked, maxWindow).
// Every other option (timeout, ...) and every repeat is left out of the
// OACK, which tells the client it was not taken. Option names are matched
// without case and echoed as sent, so an OACK is at most 2 +
// len("blksize\x0065464\x00") + len("tsize\x00") + 20 +
// len("windowsize\x0016\x00") = 56 bytes.
func negotiate(opts []option, size int64, octet bool, limit int) negotiated {
	n := negotiated{blksize: defaultBlock}
	seen := map[string]bool{}
	for _, o := range opts {
		key := strings.ToLower(o.name)
		if seen[key] {
			continue
		}
		seen[key] = true
		switch key {
		case "blksize":
			v, err := strconv.Atoi(o.value)
			if err != nil || v < minBlock || v > maxBlock {
				continue
			}
			n.blksize = min(v, limit)
			n.oack = append(n.oack, option{o.name, strconv.Itoa(n.blksize)})
		case "tsize":
			if octet && size >= 0 {
				n.oack = append(n.oack, option{o.name, strconv.FormatInt(size, 10)})
			}
		case "windowsize":
			v, err := strconv.Atoi(o.value)
			if err != nil || v < 1 || v > 65535 {
				continue
			}
			n.window = min(v, maxWindow)
			n.oack = append(n.oack, option{o.name, strconv.Itoa(n.window)})
		}
	}
	return n
}

func appendOACK(b []byte, opts []option) []byte {
	b = binary.BigEndian.AppendUint16(b, opOACK)
	for _, o := range opts {
		b = append(append(b, o.name...), 0)
		b = append(append(b, o.value...), 0)
	}
	return b
}

func appendError(b []byte, code uint16, msg string) []byte {
	b = binary.BigEndian.AppendUint16(b, opERROR)
	b = binary.BigEndian.AppendUint16(b, code)
	return append(append(b, msg...), 0)
}

// reply is what a client sent back during a transfer: an ACK of block, an
// ERROR with code and msg, or anything else (op is then neither).
type reply struct {
	op, block, code uint16
	msg             string
}

func parseReply(b []byte) reply {
	if len(b) < 4 {
		return reply{}
	}
	r := reply{op: binary.BigEndian.Uint16(b)}
	switch r.op {
	case opACK:
		r.block = binary.BigEndian.Uint16(b[2:])
	case opERROR:
		r.code = binary.BigEndian.Uint16(b[2:])
		r.msg, _, _ = strings.Cut(string(b[4:]), "\x00")
	default:
		return reply{}
	}
	return r
}
