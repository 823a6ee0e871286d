package firmware

import (
	"context"
	"errors"
	"time"
)

// Result is how one node's work ended in Run.
type Result struct {
	Node  Node
	Err   error
	Start time.Time // when the gate let it start (zero: never started)
	End   time.Time
}

// RunOptions tune Run.
type RunOptions struct {
	// Retry is how often nodes the gate holds back are asked about again
	// when no update ends meanwhile; default 1s.
	Retry time.Duration
	Now   func() time.Time
	// Stop, when it returns true, starts no further node (a cancelled
	// campaign: what is in flight finishes, nothing stops mid-flash).
	Stop func() bool
}

// ErrStopped is the result of a node Run never started because Stop said so.
var ErrStopped = errors.New("campaign stopped before this node started")

type ended struct {
	i   int
	err error
	at  time.Time
}

// Run drives nodes through work under the gate: each node's work (its
// packages applied in order, Apply) starts when the gate admits it, and
// the gate is told when it ends. Nodes are tried in order. Run returns
// when every node has ended or will not start (ctx ended: context error;
// Stop: ErrStopped).
func Run(ctx context.Context, g *Gate, nodes []Node, o RunOptions, work func(context.Context, Node) error) []Result {
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	results := make([]Result, len(nodes))
	var pending []int
	for i, n := range nodes {
		results[i].Node = n
		pending = append(pending, i)
	}
	done := make(chan ended)
	running := 0
	for len(pending) > 0 || running > 0 {
		wait := o.Retry
		if stopped := stopReason(ctx, o.Stop); stopped != nil {
			for _, i := range pending {
				results[i].Err, results[i].End = stopped, o.Now()
			}
			pending = nil
		} else {
			var started []int
			pending, started, wait = launch(g, nodes, pending, o)
			for _, i := range started {
				results[i].Start = o.Now()
				running++
				go func() { err := work(ctx, nodes[i]); done <- ended{i, err, o.Now()} }()
			}
		}
		if running == 0 && len(pending) == 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case e := <-done:
			running--
			results[e.i].Err, results[e.i].End = e.err, e.at
			g.Done(nodes[e.i])
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return results
}

func stopReason(ctx context.Context, stop func() bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if stop != nil && stop() {
		return ErrStopped
	}
	return nil
}

// launch asks the gate about every pending node: it returns those still
// pending, those admitted, and how long to wait before asking again.
func launch(g *Gate, nodes []Node, pending []int, o RunOptions) (left, admitted []int, wait time.Duration) {
	wait = o.Retry
	for _, i := range pending {
		ok, w, _ := g.Admit(o.Now(), nodes[i])
		if ok {
			admitted = append(admitted, i)
			continue
		}
		left = append(left, i)
		if w > 0 && w < wait {
			wait = w
		}
	}
	return left, admitted, wait
}
