package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Under ingot.service stderr is the journal stream: records go to journald
// as fields; anywhere else (a terminal, a redirected stderr that inherited
// JOURNAL_STREAM) they stay text on stderr.
func TestLoggerPicksJournal(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "journal.socket")
	j, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	for name, stream := range map[string]string{"journal": fmt.Sprintf("%d:%d", st.Dev, st.Ino), "redirected": fmt.Sprintf("%d:%d", st.Dev, st.Ino+1), "terminal": ""} {
		t.Run(name, func(t *testing.T) {
			if err := stderr.Truncate(0); err != nil {
				t.Fatal(err)
			}
			e := &env{stderr: stderr, getenv: func(k string) string { return map[string]string{"JOURNAL_STREAM": stream}[k] }, journalSocket: sock}
			e.logger("debug").Debug("lease committed", "mac", "52:54:00:aa:bb:cc")
			buf := make([]byte, 4096)
			j.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := j.Read(buf)
			text, _ := os.ReadFile(stderr.Name())
			if name != "journal" {
				if err == nil {
					t.Errorf("journald got %q", buf[:n])
				}
				if !strings.Contains(string(text), `msg="lease committed" mac=52:54:00:aa:bb:cc`) {
					t.Errorf("stderr %q lacks the text record", text)
				}
				return
			}
			if err != nil {
				t.Fatalf("journald got nothing: %v (stderr %q)", err, text)
			}
			for _, want := range []string{"MESSAGE=lease committed\n", "PRIORITY=7\n", "SYSLOG_IDENTIFIER=ingot\n", "MAC=52:54:00:aa:bb:cc\n"} {
				if !strings.Contains(string(buf[:n]), want) {
					t.Errorf("entry %q lacks %q", buf[:n], want)
				}
			}
			if len(text) != 0 {
				t.Errorf("stderr got %q as well", text)
			}
		})
	}
}
