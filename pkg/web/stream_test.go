package web_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/web"
)

// A job's stream sends its progress as it changes and a heartbeat, and
// ends, saying why, at the first heartbeat after its token is revoked;
// with no session at all it is refused (401: a browser's EventSource
// stops).
func TestStreamEndsWhenTheTokenIsRevoked(t *testing.T) {
	l := newLab(t, labOptions{machines: 3, bmcs: 1, slow: []string{"r01-n01"}, slowSteps: 200, slowDelay: 100 * time.Millisecond})
	ts, b := ownDashboard(t, l, web.Config{Heartbeat: 200 * time.Millisecond, Poll: 50 * time.Millisecond})
	c := b.c
	ctx := context.Background()
	m, _ := l.p.Fleet.Get(ctx, "r01-n01")
	j, err := l.p.Engine.ReimageWith(ctx, m.ID, "operator:test", "stream test", engine.ReimageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := b.do("GET", "/ui/jobs/"+j.ID+"/stream", nil, map[string]string{"Accept": "text/event-stream"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a stream without a session: %d, want 401", resp.StatusCode)
	}
	b.login(l.op)
	req, _ := http.NewRequest("GET", ts.URL+"/ui/jobs/"+j.ID+"/stream", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var progress, pings int
	revoked := false
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the stream closed without an end event (%d progress, %d pings)", progress, pings)
			}
			switch {
			case line == "event: progress":
				progress++
			case line == ": ping":
				pings++
			case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"why":"session"`):
				if !revoked {
					t.Fatal("the stream ended with its session before the token was revoked")
				}
				return
			case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"why"`):
				t.Fatalf("the stream ended with %s, want the session (%d progress, %d pings)", line, progress, pings)
			}
			if !revoked && progress >= 3 && pings >= 2 {
				revokeAll(t, l, "alice")
				revoked = true
			}
		case <-deadline:
			t.Fatalf("after 30 s: %d progress events, %d pings, revoked %v, and the stream has not ended", progress, pings, revoked)
		}
	}
}

func revokeAll(t *testing.T, l *lab, name string) {
	toks, _ := l.p.Fleet.Tokens(context.Background())
	for _, tk := range toks {
		if tk.Name == name {
			if err := l.p.Fleet.RevokeToken(context.Background(), tk.ID, "operator:test"); err != nil {
				t.Fatal(err)
			}
		}
	}
}
