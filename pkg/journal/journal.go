// Package journal is a log/slog handler that writes each record to
// systemd-journald's native socket, as sd_journal_send(3) does: one datagram
// of fields, MESSAGE, PRIORITY and SYSLOG_IDENTIFIER first, then every
// attribute as a field of its own (mac=... becomes MAC=..., a group's
// attributes GROUP_KEY=...), so `journalctl -u ingot MAC=52:54:00:aa:bb:cc`
// or `-o json` finds them without parsing text. The protocol is journald's
// (systemd's "Native Journal Protocol" document): NAME=value lines, or for a
// value holding a newline NAME, a newline, its length as a 64-bit
// little-endian number, the value and a newline. A record too large for a
// datagram travels as a sealed memfd, as libsystemd sends it.
package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSocket is journald's native protocol socket.
const DefaultSocket = "/run/systemd/journal/socket"

// Options configure a Handler.
type Options struct {
	Socket     string       // default DefaultSocket
	Identifier string       // SYSLOG_IDENTIFIER, e.g. "ingot"
	Level      slog.Leveler // default slog.LevelInfo
	AddSource  bool         // CODE_FILE, CODE_LINE and CODE_FUNC
	// Fallback gets a record journald could not take (it restarts, its
	// socket is gone); nil drops it.
	Fallback slog.Handler
}

// Handler is a slog.Handler writing to the journal. It is safe for
// concurrent use; handlers made by WithAttrs and WithGroup share its socket.
type Handler struct {
	opts   Options
	out    *sender
	attrs  []byte // fields encoded by WithAttrs
	prefix string // the open groups, as NAME_ prefixes
}

// New returns a Handler for opts.Socket, which must exist.
func New(opts Options) (*Handler, error) {
	if opts.Socket == "" {
		opts.Socket = DefaultSocket
	}
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	if _, err := os.Stat(opts.Socket); err != nil {
		return nil, fmt.Errorf("journal socket: %w", err)
	}
	return &Handler{opts: opts, out: newSender(opts.Socket)}, nil
}

// Enabled reports whether level is at or above the handler's level.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.opts.Level.Level()
}

// Handle sends r as one journal entry.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	b := make([]byte, 0, 256+len(h.attrs))
	b = appendField(b, "MESSAGE", r.Message)
	b = appendField(b, "PRIORITY", strconv.Itoa(Priority(r.Level)))
	if h.opts.Identifier != "" {
		b = appendField(b, "SYSLOG_IDENTIFIER", h.opts.Identifier)
	}
	if h.opts.AddSource && r.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		b = appendField(b, "CODE_FILE", f.File)
		b = appendField(b, "CODE_LINE", strconv.Itoa(f.Line))
		b = appendField(b, "CODE_FUNC", f.Function)
	}
	b = append(b, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		b = appendAttr(b, h.prefix, a)
		return true
	})
	err := h.out.send(b)
	if err != nil && h.opts.Fallback != nil {
		r.AddAttrs(slog.String("journal_error", err.Error()))
		return h.opts.Fallback.Handle(ctx, r)
	}
	return err
}

// WithAttrs returns a handler that adds attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clip(h.attrs)
	for _, a := range attrs {
		c.attrs = appendAttr(c.attrs, h.prefix, a)
	}
	if h.opts.Fallback != nil {
		c.opts.Fallback = h.opts.Fallback.WithAttrs(attrs)
	}
	return &c
}

// WithGroup returns a handler whose later attributes' names start NAME_.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "_"
	if h.opts.Fallback != nil {
		c.opts.Fallback = h.opts.Fallback.WithGroup(name)
	}
	return &c
}

// Priority maps a slog level to syslog's: debug 7, info 6, warn 4, error 3.
func Priority(l slog.Level) int {
	switch {
	case l < slog.LevelInfo:
		return 7
	case l < slog.LevelWarn:
		return 6
	case l < slog.LevelError:
		return 4
	}
	return 3
}

// appendAttr appends a (a group: each of its attributes) as fields.
func appendAttr(b []byte, prefix string, a slog.Attr) []byte {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "_"
		}
		for _, g := range v.Group() {
			b = appendAttr(b, p, g)
		}
		return b
	}
	if a.Key == "" {
		return b
	}
	return appendField(b, FieldName(prefix+a.Key), valueString(v))
}

func valueString(v slog.Value) string {
	switch v.Kind() {
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return err.Error()
		}
	}
	return v.String()
}

// appendField appends one field in the native protocol's encoding.
func appendField(b []byte, name, value string) []byte {
	if !strings.ContainsRune(value, '\n') {
		b = append(b, name...)
		b = append(b, '=')
		b = append(b, value...)
		return append(b, '\n')
	}
	b = append(b, name...)
	b = append(b, '\n')
	b = binary.LittleEndian.AppendUint64(b, uint64(len(value)))
	b = append(b, value...)
	return append(b, '\n')
}

// reserved are the fields the journal or its clients give a meaning; an
// attribute of that name is renamed INGOT_NAME rather than forge one.
var reserved = map[string]bool{
	"MESSAGE": true, "MESSAGE_ID": true, "PRIORITY": true, "CODE_FILE": true, "CODE_LINE": true, "CODE_FUNC": true,
	"ERRNO": true, "INVOCATION_ID": true, "USER_INVOCATION_ID": true, "SYSLOG_FACILITY": true, "SYSLOG_IDENTIFIER": true,
	"SYSLOG_PID": true, "SYSLOG_TIMESTAMP": true, "SYSLOG_RAW": true, "DOCUMENTATION": true, "TID": true,
	"UNIT": true, "USER_UNIT": true, "COREDUMP_UNIT": true, "OBJECT_PID": true,
}

// FieldName turns an attribute key into a journal field name: upper case,
// every character but A-Z, 0-9 and _ as _, at most 64 bytes, starting with
// a letter (a leading _ would claim a trusted field journald sets itself).
func FieldName(key string) string {
	b := make([]byte, 0, len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			c = '_'
		}
		b = append(b, c)
	}
	name := string(b)
	if name == "" || name[0] < 'A' || name[0] > 'Z' || reserved[name] {
		name = "INGOT_" + strings.TrimLeft(name, "_")
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// IsStream reports whether f (the process's stderr) is the stream systemd
// connected to the journal: $JOURNAL_STREAM (the value of env) holds its
// device and inode as "DEV:INODE" (systemd.exec(5)). A program whose stderr
// was redirected elsewhere inherits the variable but fails this check.
func IsStream(env string, f *os.File) bool {
	devS, inoS, ok := strings.Cut(env, ":")
	if !ok || f == nil {
		return false
	}
	dev, err1 := strconv.ParseUint(devS, 10, 64)
	ino, err2 := strconv.ParseUint(inoS, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && uint64(st.Ino) == ino
}
