package scaleout

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
)

// Segment is one broadcast domain this instance may answer DHCP on: the
// instances serving it hold an election (elect/dhcp/<name>), and only the
// leader answers (see pkg/boot/dhcp active.go for why one, not all).
// Instances on different segments name different segments and all answer.
type Segment struct {
	n       *Node
	name    string
	leading atomic.Bool
}

// Segment returns the segment of the subnets this instance's pools serve,
// which is what instances on one broadcast domain share. Without pools
// (proxy DHCP hands out no address, so two answering is harmless) there
// is no election: every instance answers while its membership holds.
func (n *Node) Segment(subnets []string) *Segment {
	name := strings.NewReplacer("/", "_", ":", "_").Replace(strings.Join(subnets, "+"))
	return &Segment{n: n, name: name}
}

// Active reports whether this instance answers the segment now: always in
// a group of one; on etcd while it leads the segment's election and its
// membership certainly holds (Node.Serving: judged from the clock, so a
// leader cut off from etcd stops answering before another is elected).
func (s *Segment) Active() bool {
	if !s.n.Shared() {
		return true
	}
	if s.name == "" {
		return s.n.Serving()
	}
	return s.leading.Load() && s.n.Serving()
}

// Run campaigns for the segment with each membership in turn until ctx
// ends (a supervisor service beside the DHCP server).
func (s *Segment) Run(ctx context.Context) error {
	if !s.n.Shared() || s.name == "" {
		<-ctx.Done()
		return nil
	}
	for ctx.Err() == nil {
		m := s.n.current()
		if m == nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		s.n.es.Lead(ctx, m, "dhcp/"+s.name, func(lctx context.Context) {
			s.leading.Store(true)
			s.n.log.Info("answering DHCP on the segment", "segment", s.name, "member", m.ID())
			<-lctx.Done()
			s.leading.Store(false)
			s.n.log.Info("no longer answering DHCP on the segment", "segment", s.name, "member", m.ID())
		})
		select {
		case <-ctx.Done():
		case <-m.Done():
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
