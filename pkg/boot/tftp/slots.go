package tftp

import (
	"net/netip"
	"sync"
	"time"
)

// slots decides which read requests get a transfer, and when.
//
// At most max transfers run at once (each holds a socket, an open file and
// a goroutine), at most perClient of them, running or waiting, for one
// client address. A request that finds every slot taken waits for one,
// without a socket and without a packet sent, for at most maxWait; at most
// max requests wait, and when one more comes the one that waited longest is
// dropped. A slot that comes free goes to the request that waited longest.
//
// Waiting rather than refusing lets a client that asked during a burst (a
// rack booting, or a flood of requests that will never be acknowledged,
// whose slots come free after Config.FirstACKWait) be served as soon as a
// slot is free, instead of after its own retransmit timer: tftp-hpa resends
// its request after 5 s, curl 7.88 not within 13 s.
type slots struct {
	max, perClient int
	maxWait        time.Duration

	mu       sync.Mutex
	running  int
	byClient map[netip.Addr]int // running and waiting
	waiting  []*job             // oldest first
	closed   bool
}

// verdict is what admit decided for a request.
type verdict int

const (
	admitRun         verdict = iota // start the transfer now
	admitWait                       // parked until a slot is free
	admitClientLimit                // refused: the client has perClient transfers already
	admitClosed                     // refused: the server is stopping
)

func newSlots(max, perClient int, maxWait time.Duration) *slots {
	return &slots{max: max, perClient: perClient, maxWait: maxWait, byClient: map[netip.Addr]int{}}
}

// admit decides for j, which arrived at j.since. When a waiting request is
// pushed out to make room, it is returned as dropped.
func (s *slots) admit(j *job) (v verdict, dropped *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return admitClosed, nil
	case s.byClient[j.client.Addr()] >= s.perClient:
		return admitClientLimit, nil
	}
	s.byClient[j.client.Addr()]++
	if s.running < s.max {
		s.running++
		return admitRun, nil
	}
	if len(s.waiting) >= s.max {
		dropped = s.waiting[0]
		s.waiting = s.waiting[1:]
		s.forget(dropped)
	}
	s.waiting = append(s.waiting, j)
	return admitWait, dropped
}

// release ends j's transfer at now. Its slot goes to next, the request that
// has waited longest and not longer than maxWait (the caller starts it);
// requests that waited longer are returned as expired, to be dropped.
func (s *slots) release(j *job, now time.Time) (next *job, expired []*job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(j)
	for len(s.waiting) > 0 && !s.closed {
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		if now.Sub(w.since) <= s.maxWait {
			return w, expired // the slot passes on: running is unchanged
		}
		s.forget(w)
		expired = append(expired, w)
	}
	s.running--
	return nil, expired
}

// close refuses every later request and returns those still waiting.
func (s *slots) close() []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	w := s.waiting
	s.waiting = nil
	for _, j := range w {
		s.forget(j)
	}
	return w
}

// forget drops j from its client's count; s.mu is held.
func (s *slots) forget(j *job) {
	a := j.client.Addr()
	if s.byClient[a]--; s.byClient[a] <= 0 {
		delete(s.byClient, a)
	}
}

// counts returns the running and waiting transfers (for tests and logs).
func (s *slots) counts() (running, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, len(s.waiting)
}
