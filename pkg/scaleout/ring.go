package scaleout

import (
	"hash/fnv"
	"slices"
	"strings"
	"sync"
)

// Ring splits per-machine work (BMC telemetry, inventory refresh, BMC
// password rotation) across the live instances by rendezvous hashing on
// the machine ID: the machine goes to the instance whose name hashes
// highest with it. When an instance joins or leaves, only the machines it
// wins or held move (about 1/N of them), and every instance computes the
// same answer from the same member list, without talking to the others.
type Ring struct {
	self string
	solo bool        // a group of one: every machine is this instance's
	held func() bool // this instance's membership holds (Node.Serving)

	mu    sync.RWMutex
	names []string // live instance names, sorted
}

func newRing(self string) *Ring { return &Ring{self: self} }

// set replaces the live members (IDs name/lease; a name joined twice
// counts once).
func (r *Ring) set(ids []string) {
	var names []string
	for _, id := range ids {
		name, _, _ := strings.Cut(id, "/")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	r.mu.Lock()
	r.names = names
	r.mu.Unlock()
}

// Members are the live instance names, sorted.
func (r *Ring) Members() []string {
	if r.solo {
		return []string{r.self}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.names)
}

// Owner is the instance that polls machine id ("" before the first list).
func (r *Ring) Owner(id string) string {
	if r.solo {
		return r.self
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return pick(r.names, id)
}

// Mine reports whether this instance polls machine id. Before the first
// member list, and while this instance's membership does not hold (etcd
// unreachable: the others see it gone and take its share), nothing is
// its own.
func (r *Ring) Mine(id string) bool {
	if r.held != nil && !r.held() {
		return false
	}
	return r.Owner(id) == r.self
}

// pick is the rendezvous winner of id among names ("" when none).
func pick(names []string, id string) string {
	best, top := "", uint64(0)
	for _, n := range names {
		h := fnv.New64a()
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write([]byte(id))
		if v := mix(h.Sum64()); best == "" || v > top {
			best, top = n, v
		}
	}
	return best
}

// mix spreads FNV's output (splitmix64's finalizer): FNV of keys that
// differ in their last bytes differs mostly in its low bits.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
