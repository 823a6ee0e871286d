package lldp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// DefaultWait is how long the agent waits for LLDP frames when no other
// bound is given. Switches send one when a link comes up and then every
// 30 s (the usual default), so a short wait hears a port that came up with
// the agent, not every port: started early (see Listener) the wait costs
// little.
const DefaultWait = 5 * time.Second

// Listen hears LLDP on the named interfaces until each has announced a
// neighbour, wait passes or ctx ends, and returns what it heard, by
// interface name. Interfaces that cannot be opened (missing, no
// privileges) are left out. wait <= 0 means DefaultWait.
func Listen(ctx context.Context, ifaces []string, wait time.Duration) map[string]machine.LLDPNeighbor {
	if wait <= 0 {
		wait = DefaultWait
	}
	l, _ := Start(ifaces)
	defer l.Close()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return l.Wait(ctx)
}

// Listener hears LLDP on some interfaces in the background, from Start to
// Close, and keeps the latest neighbour each announced. Starting it when
// the agent starts lets the inventory, read later, take what has arrived
// by then without waiting.
type Listener struct {
	socks []sock
	wake  int // eventfd: Close writes it to stop the loop
	done  chan struct{}
	once  sync.Once

	mu      sync.Mutex
	heard   map[string]machine.LLDPNeighbor
	changed chan struct{} // closed (and replaced) at each change
}

type sock struct {
	name  string
	index int
	fd    int
}

// Start opens a packet socket on each interface, in the calling thread's
// network namespace, and listens in the background. The error names the
// interfaces that could not be opened; the Listener (never nil) listens on
// the others. Close it.
func Start(ifaces []string) (*Listener, error) {
	l := &Listener{wake: -1, done: make(chan struct{}), heard: map[string]machine.LLDPNeighbor{}, changed: make(chan struct{})}
	var errs []error
	opened := map[string]bool{}
	for _, name := range ifaces {
		if opened[name] {
			continue
		}
		opened[name] = true
		s, err := open(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l.socks = append(l.socks, s)
	}
	if len(l.socks) == 0 {
		close(l.done)
		return l, errors.Join(errs...)
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		l.closeSocks()
		close(l.done)
		return l, errors.Join(append(errs, fmt.Errorf("LLDP listener: eventfd: %w", err))...)
	}
	l.wake = fd
	go l.loop()
	return l, errors.Join(errs...)
}

// Neighbors returns what has been heard so far, by interface name.
func (l *Listener) Neighbors() map[string]machine.LLDPNeighbor {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]machine.LLDPNeighbor, len(l.heard))
	for k, v := range l.heard {
		out[k] = v
	}
	return out
}

// Wait returns what has been heard once every interface the Listener
// listens on has a neighbour, or when ctx ends (bound it: a port without
// LLDP never answers), or after Close.
func (l *Listener) Wait(ctx context.Context) map[string]machine.LLDPNeighbor {
	for {
		l.mu.Lock()
		all, changed := len(l.heard) >= len(l.socks), l.changed
		l.mu.Unlock()
		if all {
			return l.Neighbors()
		}
		select {
		case <-ctx.Done():
			return l.Neighbors()
		case <-l.done:
			return l.Neighbors()
		case <-changed:
		}
	}
}

// Close stops listening and closes the sockets. What was heard stays
// readable with Neighbors.
func (l *Listener) Close() error {
	l.once.Do(func() {
		if l.wake < 0 {
			return
		}
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(l.wake, one[:])
		<-l.done
		l.closeSocks()
		unix.Close(l.wake)
	})
	return nil
}

func (l *Listener) closeSocks() {
	for _, s := range l.socks {
		unix.Close(s.fd)
	}
}

// loop polls the sockets until Close wakes it.
func (l *Listener) loop() {
	defer close(l.done)
	pfds := make([]unix.PollFd, 0, len(l.socks)+1)
	for _, s := range l.socks {
		pfds = append(pfds, unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN})
	}
	pfds = append(pfds, unix.PollFd{Fd: int32(l.wake), Events: unix.POLLIN})
	buf := make([]byte, 9216) // a jumbo frame: an LLDPDU may be up to 1500 bytes and more
	for {
		if _, err := unix.Poll(pfds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if pfds[len(pfds)-1].Revents != 0 {
			return
		}
		for i, s := range l.socks {
			if pfds[i].Revents != 0 && !l.drain(s, buf) {
				pfds[i].Fd = -1 // broken: poll skips it from now on
			}
		}
	}
}

// drain reads every frame waiting on s; frames that do not parse are
// dropped (a neighbour is only what a valid LLDPDU says). It returns false
// when the socket is broken.
func (l *Listener) drain(s sock, buf []byte) bool {
	for {
		n, from, err := unix.Recvfrom(s.fd, buf, unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return true // drained
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ENETDOWN):
			continue // the link went down: it may come back
		case err != nil:
			return false
		}
		// Before bind the socket saw every interface's frames: keep only
		// this interface's, and not frames this host sent itself.
		if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Ifindex != s.index || ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		du, err := parse(buf[:n])
		if err != nil {
			continue
		}
		l.mu.Lock()
		if du.TTL == 0 { // the neighbour says it is going away (802.1AB shutdown LLDPDU)
			delete(l.heard, s.name)
		} else {
			l.heard[s.name] = du.LLDPNeighbor
		}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
}

// open makes a packet socket that receives LLDP frames on one interface,
// with the LLDP group addresses joined so the NIC's filter passes them.
func open(name string) (sock, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return sock{}, fmt.Errorf("LLDP on %s: %w", name, err)
	}
	proto := htons(EtherType)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(proto))
	if err != nil {
		return sock{}, fmt.Errorf("LLDP on %s: packet socket: %w", name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return sock{}, fmt.Errorf("LLDP on %s: binding the packet socket: %w", name, err)
	}
	for _, g := range groups {
		mreq := unix.PacketMreq{Ifindex: int32(ifc.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
		copy(mreq.Address[:], g[:])
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			unix.Close(fd)
			return sock{}, fmt.Errorf("LLDP on %s: joining %s: %w", name, net.HardwareAddr(g[:]), err)
		}
	}
	return sock{name: name, index: ifc.Index, fd: fd}, nil
}

// htons puts a 16-bit value in network byte order, as packet sockets take
// their protocol.
func htons(v uint16) uint16 {
	return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v))
}
