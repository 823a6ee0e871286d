// Package ratelimit bounds how often one client (an address) may call the
// routes anyone can reach without a credential: a token bucket per key,
// refilled at Rate per second up to Burst, with the least recently seen
// keys forgotten beyond MaxKeys so a flood of spoofed or many addresses
// cannot grow memory without bound.
package ratelimit

import (
	"container/list"
	"math"
	"sync"
	"time"
)

// Limiter is a set of token buckets by key. Safe for concurrent use.
type Limiter struct {
	rate    float64 // tokens per second
	burst   float64
	maxKeys int
	now     func() time.Time

	mu   sync.Mutex
	keys map[string]*list.Element
	lru  *list.List // front: most recently seen
}

type bucket struct {
	key    string
	tokens float64
	last   time.Time
}

// New makes a limiter of rate requests per second per key with bursts of
// burst (at least 1), remembering at most maxKeys keys (default 65536);
// now is the clock (nil: time.Now). rate <= 0 allows everything.
func New(rate float64, burst, maxKeys int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	if maxKeys <= 0 {
		maxKeys = 1 << 16
	}
	return &Limiter{rate: rate, burst: math.Max(1, float64(burst)), maxKeys: maxKeys, now: now,
		keys: map[string]*list.Element{}, lru: list.New()}
}

// Allow takes one token from key's bucket. When there is none it returns
// false and how long until there will be.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	if l == nil || l.rate <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *bucket
	if e, ok := l.keys[key]; ok {
		l.lru.MoveToFront(e)
		b = e.Value.(*bucket)
		b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
		b.last = now
	} else {
		b = &bucket{key: key, tokens: l.burst, last: now}
		l.keys[key] = l.lru.PushFront(b)
		for l.lru.Len() > l.maxKeys {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.keys, old.Value.(*bucket).key)
		}
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// Keys is how many keys are remembered now.
func (l *Limiter) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
