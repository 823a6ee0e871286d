package serve

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
)

// perClientLimit wraps ln so that one client address holds at most max
// open connections: a connection over the limit is closed as soon as it is
// accepted, so a few hosts on the boot network cannot hold every slot.
func perClientLimit(ln net.Listener, max int, log *slog.Logger) net.Listener {
	return &limitListener{Listener: ln, max: max, open: map[netip.Addr]int{}, log: log}
}

type limitListener struct {
	net.Listener
	max  int
	log  *slog.Logger
	mu   sync.Mutex
	open map[netip.Addr]int
}

func (l *limitListener) Accept() (net.Conn, error) {
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
			return &limitConn{Conn: c, release: func() { l.give(addr) }}, nil
		}
		l.log.Warn("http: connection refused: the client holds its limit of open connections", "from", addr, "limit", l.max)
		c.Close()
	}
}

func (l *limitListener) take(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a] >= l.max {
		return false
	}
	l.open[a]++
	return true
}

func (l *limitListener) give(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a]--; l.open[a] <= 0 {
		delete(l.open, a)
	}
}

// limitConn gives its slot back once, when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
