package agent

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Console writes the agent's lines to the machine's console and keeps the
// most recent ones to post to the server's log endpoint. Markers start with
// "ingot-agent: " and are what end-to-end tests wait for.
type Console struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte
	lines   []string
	posted  int // lines already taken by Take
	max     int
}

// NewConsole writes to w and keeps up to 2000 lines.
func NewConsole(w io.Writer) *Console { return &Console{w: w, max: 2000} }

// Write implements io.Writer (for the slog handler).
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.w.Write(p)
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		c.keep(string(c.partial[:i]))
		c.partial = c.partial[i+1:]
	}
	return n, err
}

func (c *Console) keep(l string) {
	c.lines = append(c.lines, l)
	if len(c.lines) > c.max {
		drop := len(c.lines) - c.max
		c.lines = c.lines[drop:]
		c.posted = max(0, c.posted-drop)
	}
}

// Mark prints one marker line: "ingot-agent: " + the formatted text.
func (c *Console) Mark(format string, args ...any) {
	fmt.Fprintf(c, "ingot-agent: "+format+"\n", args...)
}

// Take returns the lines not taken before.
func (c *Console) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.lines[c.posted:]...)
	c.posted = len(c.lines)
	return out
}
