package connlimit

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// One address holds at most its limit; a connection over it is closed at
// once, another address is not affected, and a slot comes back when its
// connection closes.
func TestPerClient(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := PerClient(raw, 2, nil)
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedAtOnce := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := io.ReadAll(c)
		return err == nil // EOF: closed by the server
	}
	wait := func() net.Conn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(2 * time.Second):
			t.Fatal("no connection accepted")
			return nil
		}
	}
	dial("127.0.0.1")
	s1 := wait()
	dial("127.0.0.1")
	wait()
	if third := dial("127.0.0.1"); !closedAtOnce(third) {
		t.Error("a third connection from one address stayed open (limit 2)")
	}
	dial("127.0.0.2")
	wait()     // another address has its own slots
	s1.Close() // the server closes one: its slot comes back
	s1.Close() // once only
	if c := dial("127.0.0.1"); closedAtOnce(c) {
		t.Error("after one of two connections closed, a new one was refused")
	}
	if c := dial("127.0.0.1"); !closedAtOnce(c) {
		t.Error("a second close gave a slot back twice")
	}
	if PerClient(raw, 0, nil) != raw {
		t.Error("limit 0 wrapped the listener")
	}
}

// A limited connection still offers its TCP connection's ReadFrom, the way
// net/http sends files with sendfile.
func TestConnKeepsReadFrom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := PerClient(ln, 4, slog.New(slog.DiscardHandler))
	defer lim.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := lim.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rf, ok := c.(io.ReaderFrom)
	if !ok {
		t.Fatal("the limited connection hides io.ReaderFrom")
	}
	if n, err := rf.ReadFrom(strings.NewReader("hello")); n != 5 || err != nil {
		t.Errorf("ReadFrom = %d, %v", n, err)
	}
}
