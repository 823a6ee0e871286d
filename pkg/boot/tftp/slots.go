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
// without a socket and without a packet sent, in a list of at most
// maxWaiting.
//
// A client that is not answered sends its request again (EDK2 every 4 s,
// tftp-hpa every 5 s, iPXE sooner). A repeat of a request that is waiting
// (same address, port and file) is not a new request: it keeps its place,
// and it proves the client is there, which a request forged in someone
// else's name never does. So a free slot goes first to the request that
// has waited longest among those repeated, then to the longest-waiting
// other; a request whose client has not asked again for maxWait is dropped
// (it gave up, or never was). When the list is full, a new request pushes
// out the oldest one never repeated, or, when every waiting request has
// been repeated, is itself dropped (its client asks again).
//
// This serves a boot storm in order of arrival, every machine within a
// couple of its retransmissions: before, the list held max requests and a
// new one pushed out the oldest, so with 500 machines asking at once each
// waiting request lasted well under a second before the next retransmission
// pushed it out, the slots went to whoever happened to be waiting, and a
// fifth of the machines ran out of retries (pkg/storm's BenchmarkBootStorm
// at 500 machines). And a flood of forged requests, never repeated, cannot
// hold a real client back for more than the time a slot takes to come free.
type slots struct {
	max, perClient int
	maxWaiting     int
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
	admitRepeat                     // a repeat of a waiting request: it keeps its place
	admitFull                       // dropped: every slot busy, every waiting request repeated
	admitClientLimit                // refused: the client has perClient transfers already
	admitClosed                     // refused: the server is stopping
)

func newSlots(max, perClient, maxWaiting int, maxWait time.Duration) *slots {
	return &slots{max: max, perClient: perClient, maxWaiting: maxWaiting, maxWait: maxWait, byClient: map[netip.Addr]int{}}
}

// admit decides for j, which arrived at j.since. When a waiting request is
// pushed out to make room, it is returned as dropped.
func (s *slots) admit(j *job) (v verdict, dropped *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return admitClosed, nil
	}
	for _, w := range s.waiting {
		if w.client == j.client && w.req.name == j.req.name {
			w.asked, w.last = w.asked+1, j.since
			return admitRepeat, nil
		}
	}
	if s.byClient[j.client.Addr()] >= s.perClient {
		return admitClientLimit, nil
	}
	if s.running < s.max {
		s.byClient[j.client.Addr()]++
		s.running++
		return admitRun, nil
	}
	if len(s.waiting) >= s.maxWaiting {
		i := s.oldestUnrepeated()
		if i < 0 {
			return admitFull, nil
		}
		dropped = s.remove(i)
	}
	s.byClient[j.client.Addr()]++
	j.asked, j.last = 1, j.since
	s.waiting = append(s.waiting, j)
	return admitWait, dropped
}

// oldestUnrepeated is the index of the longest-waiting request never
// repeated; -1: none. s.mu is held.
func (s *slots) oldestUnrepeated() int {
	for i, w := range s.waiting {
		if w.asked < 2 {
			return i
		}
	}
	return -1
}

// remove takes the waiting request at i out of the list; s.mu is held.
func (s *slots) remove(i int) *job {
	w := s.waiting[i]
	s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
	s.forget(w)
	return w
}

// release ends j's transfer at now. Its slot goes to next (the caller
// starts it): the longest-waiting repeated request, else the longest-waiting
// one; requests whose clients went quiet for longer than maxWait are
// returned as expired, to be dropped.
func (s *slots) release(j *job, now time.Time) (next *job, expired []*job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(j)
	kept := s.waiting[:0]
	for _, w := range s.waiting {
		if now.Sub(w.last) > s.maxWait {
			s.forget(w)
			expired = append(expired, w)
			continue
		}
		kept = append(kept, w)
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
	if len(s.waiting) == 0 || s.closed {
		s.running--
		return nil, expired
	}
	i := 0
	for k, w := range s.waiting {
		if w.asked >= 2 {
			i = k
			break
		}
	}
	next = s.waiting[i]
	s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
	return next, expired // the slot passes on: running is unchanged
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
