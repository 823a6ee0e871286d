// Package webtest drives a real Chromium through the DevTools protocol
// (CDP) for the dashboard's tests: Debian's chromium, headless, a fresh
// profile, trusting exactly one CA by its public key (never every
// certificate). The client is small and speaks CDP's JSON over a
// websocket (golang.org/x/net/websocket): commands with an id and their
// answers, events by method, one flat connection for every page.
//
// It is test support: nothing in ingot's binaries imports it.
package webtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/net/websocket"
)

// message is one CDP message: a command, its answer or an event.
type message struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *cdpError) Error() string {
	return fmt.Sprintf("CDP error %d: %s %s", e.Code, e.Message, e.Data)
}

// event is one CDP event as a listener gets it.
type event struct {
	Method    string
	SessionID string
	Params    json.RawMessage
}

// conn is one websocket to the browser, shared by every page (flat
// sessions: each command and event names its session).
type conn struct {
	ws *websocket.Conn

	mu        sync.Mutex
	next      int64
	pending   map[int64]chan message
	listeners map[int]func(event)
	nextL     int
	closed    error
}

func dial(url string) (*conn, error) {
	cfg, err := websocket.NewConfig(url, "http://127.0.0.1")
	if err != nil {
		return nil, err
	}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to Chromium's DevTools at %s: %w", url, err)
	}
	ws.MaxPayloadBytes = 64 << 20 // full-page screenshots
	c := &conn{ws: ws, pending: map[int64]chan message{}, listeners: map[int]func(event){}}
	go c.read()
	return c, nil
}

func (c *conn) read() {
	for {
		var raw []byte
		if err := websocket.Message.Receive(c.ws, &raw); err != nil {
			c.fail(fmt.Errorf("reading from Chromium: %w", err))
			return
		}
		var m message
		if err := json.Unmarshal(raw, &m); err != nil {
			continue
		}
		c.mu.Lock()
		if m.ID != 0 {
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		ls := make([]func(event), 0, len(c.listeners))
		for _, l := range c.listeners {
			ls = append(ls, l)
		}
		c.mu.Unlock()
		for _, l := range ls {
			l(event{Method: m.Method, SessionID: m.SessionID, Params: m.Params})
		}
	}
}

func (c *conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		c.closed = err
	}
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
}

// call sends one command (in a session, or to the browser with "") and
// decodes its result into out (nil: dropped).
func (c *conn) call(ctx context.Context, session, method string, params, out any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if params == nil {
		p = []byte("{}")
	}
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return c.closed
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	b, _ := json.Marshal(message{ID: id, Method: method, Params: p, SessionID: session})
	if err := websocket.Message.Send(c.ws, string(b)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	case m, ok := <-ch:
		switch {
		case !ok:
			return fmt.Errorf("%s: %w", method, errors.Join(errors.New("connection closed"), c.closed))
		case m.Error != nil:
			return fmt.Errorf("%s: %w", method, m.Error)
		case out != nil:
			return json.Unmarshal(m.Result, out)
		}
		return nil
	}
}

// listen calls f for every event until the returned function is called.
func (c *conn) listen(f func(event)) (stop func()) {
	c.mu.Lock()
	c.nextL++
	id := c.nextL
	c.listeners[id] = f
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.listeners, id)
		c.mu.Unlock()
	}
}

func (c *conn) close() { _ = c.ws.Close() }
