package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// fakeJournal is a real datagram socket standing in for journald.
type fakeJournal struct {
	t    *testing.T
	path string
	conn *net.UnixConn
}

func newFakeJournal(t *testing.T, path string) *fakeJournal {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fakeJournal{t: t, path: path, conn: c}
}

// next reads one entry, from the datagram or from the memfd passed with it,
// and decodes its fields (a field given twice keeps both values).
func (j *fakeJournal) next() (map[string][]string, bool) {
	j.t.Helper()
	buf, oob := make([]byte, 1<<20), make([]byte, 64)
	j.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, oobn, _, _, err := j.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		j.t.Fatalf("reading an entry: %v", err)
	}
	body, viaMemfd := buf[:n], false
	if oobn > 0 {
		body, viaMemfd = readMemfd(j.t, oob[:oobn]), true
	}
	f, err := Decode(body)
	if err != nil {
		j.t.Fatalf("decoding %q: %v", body, err)
	}
	return f, viaMemfd
}

func readMemfd(t *testing.T, oob []byte) []byte {
	t.Helper()
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control message: %v (%d)", err, len(msgs))
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("rights: %v %v", fds, err)
	}
	f := os.NewFile(uintptr(fds[0]), "memfd")
	defer f.Close()
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if err != nil || seals&want != want {
		t.Errorf("memfd seals %#x (%v), want %#x: journald refuses an unsealed memfd", seals, err, want)
	}
	// The descriptor shares the sender's offset (at the end); journald
	// maps the file from its start.
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestHandler(t *testing.T, opts Options) (*Handler, *fakeJournal) {
	t.Helper()
	j := newFakeJournal(t, filepath.Join(t.TempDir(), "socket"))
	opts.Socket = j.path
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, j
}

func TestFields(t *testing.T) {
	h, j := newTestHandler(t, Options{Identifier: "ingot", Level: slog.LevelDebug})
	log := slog.New(h).With("service", "dhcp").WithGroup("lease")
	log.Info("lease committed", "mac", "52:54:00:aa:bb:cc", "ip", netip.MustParseAddr("10.80.0.100"),
		slog.Group("req", "xid", 0x1234), "err", errors.New("first line\nsecond line"), "took", 1500*time.Millisecond,
		"message", "not the message", "_PID", 1, "3com", true)
	got, viaMemfd := j.next()
	if viaMemfd {
		t.Error("a small entry came as a memfd")
	}
	want := map[string][]string{
		"MESSAGE":           {"lease committed"},
		"PRIORITY":          {"6"},
		"SYSLOG_IDENTIFIER": {"ingot"},
		"SERVICE":           {"dhcp"},
		"LEASE_MAC":         {"52:54:00:aa:bb:cc"},
		"LEASE_IP":          {"10.80.0.100"},
		"LEASE_REQ_XID":     {"4660"},
		"LEASE_ERR":         {"first line\nsecond line"}, // the binary form
		"LEASE_TOOK":        {"1.5s"},
		"LEASE_MESSAGE":     {"not the message"},
		"LEASE__PID":        {"1"},
		"LEASE_3COM":        {"true"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("fields (-want +got):\n%s", d)
	}
	// Without a group, a reserved or invalid name never forges a field.
	slog.New(h).Info("m", "message", "x", "_PID", 1, "priority", 0)
	got, _ = j.next()
	for name, want := range map[string]string{"MESSAGE": "m", "INGOT_MESSAGE": "x", "INGOT_PID": "1", "PRIORITY": "6", "INGOT_PRIORITY": "0"} {
		if v := got[name]; len(v) != 1 || v[0] != want {
			t.Errorf("%s = %q, want [%q] (entry %v)", name, v, want, got)
		}
	}
}

func TestPriorities(t *testing.T) {
	h, j := newTestHandler(t, Options{Level: slog.LevelDebug})
	for _, tc := range []struct {
		level slog.Level
		want  string
	}{{slog.LevelDebug, "7"}, {slog.LevelInfo, "6"}, {slog.LevelInfo + 2, "6"}, {slog.LevelWarn, "4"}, {slog.LevelError, "3"}, {slog.LevelError + 4, "3"}} {
		slog.New(h).Log(t.Context(), tc.level, "x")
		if got, _ := j.next(); got["PRIORITY"][0] != tc.want {
			t.Errorf("level %v: PRIORITY=%v, want %s", tc.level, got["PRIORITY"], tc.want)
		}
	}
	if h2, _ := newTestHandler(t, Options{}); h2.Enabled(t.Context(), slog.LevelDebug) || !h2.Enabled(t.Context(), slog.LevelInfo) {
		t.Error("the default level is not info")
	}
}

func TestSource(t *testing.T) {
	h, j := newTestHandler(t, Options{AddSource: true})
	slog.New(h).Info("here")
	got, _ := j.next()
	if f := got["CODE_FILE"]; len(f) != 1 || !strings.HasSuffix(f[0], "journal_test.go") {
		t.Errorf("CODE_FILE=%v", f)
	}
	if f := got["CODE_FUNC"]; len(f) != 1 || !strings.HasSuffix(f[0], "TestSource") {
		t.Errorf("CODE_FUNC=%v", f)
	}
}

// An entry larger than one datagram travels as a sealed memfd.
func TestLargeEntryViaMemfd(t *testing.T) {
	h, j := newTestHandler(t, Options{})
	if err := j.conn.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("inventory ", 300_000) // 3 MB: more than any datagram
	slog.New(h).Info("big", "inventory", big)
	got, viaMemfd := j.next()
	if !viaMemfd {
		t.Error("a 3 MB entry came as a datagram")
	}
	if v := got["INVENTORY"]; len(v) != 1 || v[0] != big {
		t.Errorf("INVENTORY: %d values, want one of %d bytes", len(v), len(big))
	}
}

// journald restarted: its socket is a new one at the same path.
func TestReconnects(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "socket")
	j := newFakeJournal(t, path)
	h, err := New(Options{Socket: path})
	if err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("one")
	if got, _ := j.next(); got["MESSAGE"][0] != "one" {
		t.Fatalf("got %v", got)
	}
	j.conn.Close()
	os.Remove(path)
	j = newFakeJournal(t, path)
	slog.New(h).Info("two")
	if got, _ := j.next(); got["MESSAGE"][0] != "two" {
		t.Fatalf("after journald's restart got %v", got)
	}
}

func TestFallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "socket")
	j := newFakeJournal(t, path)
	var text bytes.Buffer
	h, err := New(Options{Socket: path, Fallback: slog.NewTextHandler(&text, nil)})
	if err != nil {
		t.Fatal(err)
	}
	j.conn.Close()
	os.Remove(path)
	slog.New(h).With("service", "tftp").Warn("journald gone", "mac", "x")
	for _, want := range []string{"journald gone", "service=tftp", "mac=x", "journal_error="} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("fallback output %q lacks %q", text.String(), want)
		}
	}
	if _, err := New(Options{Socket: path}); err == nil {
		t.Error("New accepted a missing socket")
	}
}

func TestFieldName(t *testing.T) {
	for key, want := range map[string]string{
		"mac": "MAC", "server_ip": "SERVER_IP", "ca-fingerprint": "CA_FINGERPRINT", "a.b": "A_B",
		"_PID": "INGOT_PID", "__x": "INGOT_X", "9lives": "INGOT_9LIVES", "message": "INGOT_MESSAGE", "": "INGOT_",
		strings.Repeat("k", 70): strings.Repeat("K", 64), "ünï": "INGOT_N__",
	} {
		if got := FieldName(key); got != want {
			t.Errorf("FieldName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestIsStream(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]bool{
		fmt.Sprintf("%d:%d", st.Dev, st.Ino):   true,
		fmt.Sprintf("%d:%d", st.Dev, st.Ino+1): false, // stderr redirected elsewhere
		"":                                     false, "garbage": false, "1:x": false,
	} {
		if got := IsStream(env, f); got != want {
			t.Errorf("IsStream(%q) = %v, want %v", env, got, want)
		}
	}
}
