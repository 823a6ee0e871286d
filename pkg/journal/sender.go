package journal

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// sender owns the datagram socket to journald, dialled at first use and
// again once after an error (journald restarted and made a new socket).
type sender struct {
	addr *net.UnixAddr
	mu   sync.Mutex
	conn *net.UnixConn
}

func newSender(path string) *sender {
	return &sender{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
}

// send delivers one entry: a datagram, or a sealed memfd when the entry is
// larger than the socket takes in one datagram.
func (s *sender) send(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if s.conn == nil {
			if s.conn, err = net.DialUnix("unixgram", nil, s.addr); err != nil {
				return fmt.Errorf("journal: connecting to %s: %w", s.addr.Name, err)
			}
		}
		_, err = s.conn.Write(b)
		if errors.Is(err, unix.EMSGSIZE) || errors.Is(err, unix.ENOBUFS) {
			return s.sendMemfd(b)
		}
		if err == nil {
			return nil
		}
		s.conn.Close()
		s.conn = nil
	}
	return fmt.Errorf("journal: sending %d bytes to %s: %w", len(b), s.addr.Name, err)
}

// sendMemfd writes b into a memfd, seals it so it cannot change once sent
// (journald refuses an unsealed one), and passes its descriptor alone.
func (s *sender) sendMemfd(b []byte) error {
	fd, err := unix.MemfdCreate("ingot-journal-entry", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("journal: entry of %d bytes: creating memfd: %w", len(b), err)
	}
	defer unix.Close(fd)
	for off := 0; off < len(b); {
		k, err := unix.Write(fd, b[off:])
		if err != nil {
			return fmt.Errorf("journal: entry of %d bytes: writing memfd: %w", len(b), err)
		}
		off += k
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fmt.Errorf("journal: entry of %d bytes: sealing memfd: %w", len(b), err)
	}
	// net refuses WriteMsgUnix on a connected datagram socket: sendmsg(2)
	// on its descriptor, no data, the memfd as SCM_RIGHTS.
	rc, err := s.conn.SyscallConn()
	if err == nil {
		var serr error
		if err = rc.Write(func(sfd uintptr) bool {
			serr = unix.Sendmsg(int(sfd), nil, unix.UnixRights(fd), nil, 0)
			return serr != unix.EAGAIN
		}); err == nil {
			err = serr
		}
	}
	if err != nil {
		return fmt.Errorf("journal: entry of %d bytes: passing memfd to %s: %w", len(b), s.addr.Name, err)
	}
	return nil
}
