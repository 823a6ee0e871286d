package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestLimiter(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := New(2, 4, 3, c.now) // 2/s, bursts of 4, 3 keys
	allowed := func(key string, n int) int {
		ok := 0
		for range n {
			if a, _ := l.Allow(key); a {
				ok++
			}
		}
		return ok
	}
	if got := allowed("10.0.0.1", 10); got != 4 {
		t.Fatalf("a burst of 10: %d allowed, want 4", got)
	}
	if a, wait := l.Allow("10.0.0.1"); a || wait != 500*time.Millisecond {
		t.Errorf("empty bucket: allowed %v, wait %v; want refused, 500ms", a, wait)
	}
	if got := allowed("10.0.0.2", 4); got != 4 {
		t.Errorf("another address is not limited by the first: %d of 4", got)
	}
	c.t = c.t.Add(time.Second)
	if got := allowed("10.0.0.1", 10); got != 2 {
		t.Errorf("after 1 s at 2/s: %d allowed, want 2", got)
	}
	c.t = c.t.Add(time.Hour)
	if got := allowed("10.0.0.1", 10); got != 4 {
		t.Errorf("after an hour the bucket holds the burst only: %d, want 4", got)
	}
	// A flood of distinct keys keeps at most MaxKeys.
	for i := range 1000 {
		l.Allow(fmt.Sprintf("10.1.%d.%d", i/256, i%256))
	}
	if l.Keys() != 3 {
		t.Errorf("%d keys remembered, want at most 3", l.Keys())
	}
	if a, _ := New(0, 0, 0, nil).Allow("x"); !a {
		t.Error("rate 0 refused")
	}
}
