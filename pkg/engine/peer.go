package engine

import (
	"context"
	"fmt"
	"sync"
)

// Peer is a node's part in a fabric test between two nodes (iperf3,
// ib_write_bw), as the engine pairs them.
type Peer struct {
	// Role: "wait" (no partner yet: ask again), "server" (listen; the peer
	// connects from Address), "client" (connect to Address).
	Role    string `json:"role"`
	Address string `json:"address,omitempty"`
}

// pairing is two machines of one recipe running one check's burn-in.
type pairing struct {
	first, second     string // machine IDs
	firstJob          string
	secondJob         string
	firstAt, secondAt string // addresses
}

// pairs holds the engine's open pairings, by recipe, wave and check. It lives in
// memory: after a restart nodes are paired afresh.
type pairs struct {
	mu sync.Mutex
	m  map[string][]*pairing
}

// Pair pairs a machine in burn-in with another of its recipe (and of its
// rollout wave, when a rollout started its job) for check:
// the first to ask waits until a second asks; then the first listens
// ("server") and the second connects ("client"). Repeats are idempotent.
// addr is where the peer reaches this machine.
func (e *Engine) Pair(ctx context.Context, machineID, check, addr string) (Peer, error) {
	j, err := e.activeJob(ctx, machineID)
	if err != nil {
		return Peer{}, fmt.Errorf("pairing %s for %s: no running job", machineID, check)
	}
	if j.Step != StepFirstBoot {
		return Peer{}, fmt.Errorf("pairing %s for %s: its job is at %s, not in burn-in", machineID, check, j.Step)
	}
	sp, err := decodeSpec(j)
	if err != nil {
		return Peer{}, err
	}
	// Nodes of one rollout wave pair with each other; jobs started outside
	// a rollout pair with others of their recipe started outside one.
	key := sp.Recipe + "/" + sp.Wave + "/" + check
	e.pairs.mu.Lock()
	defer e.pairs.mu.Unlock()
	if e.pairs.m == nil {
		e.pairs.m = map[string][]*pairing{}
	}
	for _, p := range e.pairs.m[key] {
		switch {
		case p.first == machineID && p.firstJob == j.ID:
			p.firstAt = addr
			if p.second == "" {
				return Peer{Role: "wait"}, nil
			}
			return Peer{Role: "server", Address: p.secondAt}, nil
		case p.second == machineID && p.secondJob == j.ID:
			p.secondAt = addr
			return Peer{Role: "client", Address: p.firstAt}, nil
		}
	}
	for _, p := range e.pairs.m[key] {
		if p.second == "" && p.first != machineID {
			p.second, p.secondJob, p.secondAt = machineID, j.ID, addr
			e.event(ctx, machineID, "burnin.peer", fmt.Sprintf("%s paired with %s (it listens at %s)", check, p.first, p.firstAt), map[string]string{"job": j.ID})
			return Peer{Role: "client", Address: p.firstAt}, nil
		}
	}
	// Pairings of ended jobs make room for the new one.
	kept := e.pairs.m[key][:0]
	for _, p := range e.pairs.m[key] {
		if p.first != machineID {
			kept = append(kept, p)
		}
	}
	e.pairs.m[key] = append(kept, &pairing{first: machineID, firstJob: j.ID, firstAt: addr})
	return Peer{Role: "wait"}, nil
}
