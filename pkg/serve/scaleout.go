package serve

import (
	"strings"

	"github.com/ingot-dev/ingot/pkg/scaleout"
)

// segment is the DHCP segment this instance serves: the subnets of its
// pools (instances with the same pools share a broadcast domain and elect
// one to answer it; pkg/scaleout). Made once.
func (c *Parts) segment() *scaleout.Segment {
	if c.seg == nil {
		var subnets []string
		for _, p := range c.cfg.Pools {
			subnet, _, _ := strings.Cut(p, ",")
			subnets = append(subnets, strings.TrimSpace(subnet))
		}
		c.seg = c.Node.Segment(subnets)
	}
	return c.seg
}

// mine says which machines this instance polls, refreshes and rotates
// (pkg/scaleout's Ring); nil on a store one instance holds: all of them.
func (c *Parts) mine() func(string) bool {
	if !c.Node.Shared() {
		return nil
	}
	return c.Node.Ring().Mine
}
