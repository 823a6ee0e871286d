package bmc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Pool hands out one Client per BMC (endpoint and user), shared by every
// caller: the telemetry poller, the provisioning engine, inspect. A BMC
// then sees one session from ingot however many callers use it, and keeps
// its per-BMC request limit (Config.MaxInFlight) across all of them.
//
// Get dials on first use, concurrent Gets of one BMC wait for that one
// dial. A client that stops working for a password reason (the BMC refused
// it at a session renewal, or at the first dial) is not dialed again with
// the same password: Get answers the refusal without sending anything, so
// a poller retrying every minute cannot lock the account out. A Get with
// another password dials again; Forget drops a BMC so the next Get dials.
// Other dial failures (unreachable, busy) are not remembered.
//
// Callers must not Close a pooled client (Pool.Close does); one that was
// closed anyway is dialed again by the next Get. The first Config of a BMC
// decides its client's timeouts and limits.
type Pool struct {
	dial DialFunc

	mu      sync.Mutex
	entries map[poolKey]*poolEntry
	closed  bool
}

type poolKey struct{ endpoint, user string }

// poolEntry is one BMC's client, or its dial in progress (ready open).
type poolEntry struct {
	ready    chan struct{}
	client   *Client
	err      error  // the dial's error, once ready (nil with a client)
	password string // the password dialed (or refused) with
	refused  error  // the BMC refused that password: not sent again
}

// NewPool makes a pool dialing with dial (nil: Dial). The zero Pool dials
// with Dial.
func NewPool(dial DialFunc) *Pool {
	if dial == nil {
		dial = Dial
	}
	return &Pool{dial: dial, entries: map[poolKey]*poolEntry{}}
}

func keyOf(cfg Config) poolKey {
	c := cfg
	c.defaults()
	return poolKey{endpoint: c.Endpoint, user: c.Username}
}

// Get returns the BMC's shared client, dialing it when there is none yet
// (or the one there stopped).
func (p *Pool) Get(ctx context.Context, cfg Config) (*Client, error) {
	key := keyOf(cfg)
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, &Error{Kind: KindOther, Endpoint: key.endpoint, Op: "getting a pooled client", Err: errors.New("the pool is closed")}
		}
		if p.entries == nil { // the zero Pool
			p.entries = map[poolKey]*poolEntry{}
		}
		e := p.entries[key]
		if e == nil {
			e = &poolEntry{ready: make(chan struct{}), password: cfg.Password}
			p.entries[key] = e
			p.mu.Unlock()
			p.dialEntry(ctx, key, e, cfg)
			return e.client, e.err
		}
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, wrapErr(key.endpoint, "waiting for the pooled client's dial", ctx.Err())
		}
		c, err, retry := p.use(key, e, cfg)
		if !retry {
			return c, err
		}
	}
}

// dialEntry dials e's client and publishes the outcome. A failure that is
// not a refused password leaves no entry, so the next Get dials again.
func (p *Pool) dialEntry(ctx context.Context, key poolKey, e *poolEntry, cfg Config) {
	dial := p.dial
	if dial == nil {
		dial = Dial
	}
	c, err := dial(ctx, cfg)
	p.mu.Lock()
	defer p.mu.Unlock()
	e.client, e.err = c, err
	switch {
	case err == nil && p.closed:
		_ = c.Close()
		e.client, e.err = nil, &Error{Kind: KindOther, Endpoint: key.endpoint, Op: "getting a pooled client", Err: errors.New("the pool is closed")}
	case IsKind(err, KindAuth):
		e.refused = err
	case err != nil:
		if p.entries[key] == e {
			delete(p.entries, key)
		}
	}
	close(e.ready)
}

// use decides what a ready entry gives a caller with cfg: its client, the
// remembered refusal, or (retry) a fresh dial after dropping the entry.
func (p *Pool) use(key poolKey, e *poolEntry, cfg Config) (*Client, error, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries[key] != e { // replaced or dropped meanwhile
		if e.err != nil && e.refused == nil {
			return nil, e.err, false // a failed dial: its waiters hear of it
		}
		return nil, nil, true
	}
	if e.refused == nil && e.client != nil {
		if err := e.client.stopped(); err != nil && IsKind(err, KindAuth) {
			e.refused = err
		}
	}
	switch {
	case e.refused != nil && cfg.Password == e.password:
		return nil, e.refused, false
	case e.refused != nil, e.client == nil, e.client.closed():
		if e.client != nil {
			_ = e.client.Close() // stopped or closed: it sends nothing
		}
		delete(p.entries, key)
		return nil, nil, true
	}
	return e.client, nil, false
}

// Forget drops the BMC's client (logging its session out) or remembered
// refusal: the next Get dials again.
func (p *Pool) Forget(endpoint, user string) error {
	key := keyOf(Config{Endpoint: endpoint, Username: user})
	p.mu.Lock()
	e := p.entries[key]
	delete(p.entries, key)
	p.mu.Unlock()
	if e == nil {
		return nil
	}
	<-e.ready
	if e.client != nil {
		return e.client.Close()
	}
	return nil
}

// closeWait bounds how long Pool.Close waits for logouts: a BMC that does
// not answer keeps serve's shutdown waiting no longer than this, and
// expires the session itself (its session timeout).
const closeWait = 5 * time.Second

// Close logs out every pooled client, up to 256 at once (each BMC sees
// one logout), waiting at most closeWait for all of them; later Gets
// fail. 500 BMCs answering in 0.7 s log out in about 1.5 s.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	entries := p.entries
	p.entries = map[poolKey]*poolEntry{}
	p.mu.Unlock()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 256)
	)
	for _, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			<-e.ready
			if e.client != nil {
				err := e.client.Close()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		mu.Lock()
		errs = append(errs, fmt.Errorf("closing the BMC pool: logouts still unanswered after %s; those BMCs expire the sessions themselves", closeWait))
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(errs...)
}

// Len counts the BMCs with a pooled client.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.entries {
		select {
		case <-e.ready:
			if e.client != nil {
				n++
			}
		default:
		}
	}
	return n
}
