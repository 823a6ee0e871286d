// Package connlimit caps the connections one client address may hold open
// on a listener, so that a few hosts on the boot network cannot take every
// slot of a server (serve's HTTP listeners, the warm reimage service).
package connlimit

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
)

// PerClient wraps ln so that one client address holds at most max open
// connections: a connection over the limit is closed as soon as it is
// accepted. max <= 0 returns ln as it is; log nil logs nothing.
func PerClient(ln net.Listener, max int, log *slog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &listener{Listener: ln, max: max, open: map[netip.Addr]int{}, log: log}
}

type listener struct {
	net.Listener
	max  int
	log  *slog.Logger
	mu   sync.Mutex
	open map[netip.Addr]int
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
		if err != nil {
			return c, nil
		}
		addr := ap.Addr().Unmap()
		if l.take(addr) {
			return &conn{Conn: c, release: func() { l.give(addr) }}, nil
		}
		l.log.Warn("connection refused: the client holds its limit of open connections", "from", addr, "limit", l.max)
		c.Close()
	}
}

func (l *listener) take(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a] >= l.max {
		return false
	}
	l.open[a]++
	return true
}

func (l *listener) give(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a]--; l.open[a] <= 0 {
		delete(l.open, a)
	}
}

// conn gives its slot back once, when closed.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// ReadFrom lets net/http's sendfile path through the wrapper: without it
// a download from the boot listener is copied through user space (the
// boot storm spent a fifth of serve's CPU in write()).
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
