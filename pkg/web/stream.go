package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/engine"
)

// A job's live progress as server-sent events (text/event-stream):
//
//	event: progress   data: {"state":..., "phase":..., "bytes":..., "total":..., "percent":..., "text":..., "phases_html":...}
//	event: end        data: {"why": "job"|"session"|"server"}
//	: ping            (a comment, every Heartbeat)
//
// The stream outlives the server's write timeout: every write first moves
// the connection's write deadline (http.ResponseController), and a
// heartbeat keeps proxies and the browser from taking a quiet stream for
// a dead one. Each heartbeat checks the session again (expiry, logout, a
// revoked token) and the stream ends with it; it ends too when the job
// does and when the server stops (Run).

// writeWindow is how long one write of a stream may take.
const writeWindow = 10 * time.Second

type streamEvent struct {
	progress
	PhasesHTML string `json:"phases_html,omitempty"`
}

func (s *Server) jobStream(w http.ResponseWriter, r *http.Request, sess *session) error {
	ctx := r.Context()
	j, err := s.cfg.Engine.Job(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := rc.SetWriteDeadline(time.Now().Add(writeWindow)); err != nil {
			return fmt.Errorf("setting the stream's write deadline: %w", err)
		}
		if event == "" {
			_, err = fmt.Fprintf(w, ": ping\n\n")
		} else {
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		}
		if err == nil {
			err = rc.Flush()
		}
		return err
	}
	if err := send("progress", eventOf(j)); err != nil {
		return nil // the browser went away
	}
	why := s.follow(ctx, sess, j, send)
	if why != "" {
		_ = send("end", map[string]string{"why": why})
	}
	return nil
}

// follow sends the job's progress whenever it changes until the job ends
// ("job"), the session does ("session") or the server stops ("server");
// "" when the browser went away.
func (s *Server) follow(ctx context.Context, sess *session, j *engine.Job, send func(string, any) error) string {
	poll := time.NewTicker(s.cfg.Poll)
	defer poll.Stop()
	beat := time.NewTicker(s.cfg.Heartbeat)
	defer beat.Stop()
	last := j.Updated
	for j.State == engine.JobRunning {
		select {
		case <-ctx.Done():
			return ""
		case <-s.stopping:
			return "server"
		case <-sess.done:
			return "session"
		case <-beat.C:
			if err := s.sessions.alive(ctx, sess, s.cfg.Fleet); err != nil {
				return "session"
			}
			if send("", nil) != nil {
				return ""
			}
		case <-poll.C:
			cur, err := s.cfg.Engine.Job(ctx, j.ID)
			if err != nil {
				continue
			}
			j = cur
			if j.Updated.Equal(last) {
				continue
			}
			last = j.Updated
			if send("progress", eventOf(j)) != nil {
				return ""
			}
		}
	}
	return "job"
}

func eventOf(j *engine.Job) streamEvent {
	wj := apiserver.WireJob(j)
	ev := streamEvent{progress: progressOf(wj)}
	if wj.Reimage != nil {
		ev.PhasesHTML = string(phaseBar(wj.Reimage.Phases, time.Now()))
	}
	return ev
}

// Run ends the live streams when ctx ends, so that a graceful shutdown of
// the listener is not held by browsers watching jobs. It is a service of
// serve's supervisor.
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
	s.stopOnce.Do(func() { close(s.stopping) })
	return nil
}
