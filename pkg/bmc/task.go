package bmc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/schemas"
)

// Task is the state of a Redfish task (an update the BMC runs).
type Task struct {
	URI       string    `json:"uri"`
	State     string    `json:"state"`            // New, Starting, Running, Pending, Suspended, Interrupted, Stopping, Cancelling, Completed, Exception, Killed, Cancelled, Service
	Status    string    `json:"status,omitempty"` // TaskStatus: OK, Warning, Critical
	Percent   int       `json:"percent,omitempty"`
	Messages  []string  `json:"messages,omitempty"`
	StartTime time.Time `json:"start_time,omitzero"`
	// Payload is the request the task runs (its TargetUri and body), where
	// the BMC shows it: how a resumed campaign tells its update apart.
	Payload string `json:"payload,omitempty"`
}

// Done reports a task that has ended, well or not.
func (t Task) Done() bool {
	switch t.State {
	case "Completed", "Exception", "Killed", "Cancelled":
		return true
	}
	return false
}

// Failed reports a task that ended without doing its work.
func (t Task) Failed() bool {
	return t.State == "Exception" || t.State == "Killed" || t.State == "Cancelled" ||
		t.State == "Completed" && t.Status == "Critical"
}

// Message is the task's messages in one line (the BMC's own words).
func (t Task) Message() string { return strings.Join(t.Messages, "; ") }

// taskDoc is a Task resource as read.
type taskDoc struct {
	ID              string `json:"@odata.id"`
	Type            string `json:"@odata.type"`
	TaskState       string `json:"TaskState"`
	TaskStatus      string `json:"TaskStatus"`
	PercentComplete *int   `json:"PercentComplete"`
	StartTime       string `json:"StartTime"`
	Messages        []struct {
		MessageID string `json:"MessageId"`
		Message   string `json:"Message"`
	} `json:"Messages"`
	Payload *struct {
		TargetURI string   `json:"TargetUri"`
		JSONBody  string   `json:"JsonBody"`
		Headers   []string `json:"HttpHeaders"`
	} `json:"Payload"`
}

func (d taskDoc) messages() []string {
	var out []string
	for _, m := range d.Messages {
		if l := messageLine(m.MessageID, m.Message); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (d taskDoc) task(uri string) Task {
	t := Task{URI: firstNonEmpty(d.ID, uri), State: d.TaskState, Status: d.TaskStatus, Messages: d.messages()}
	if d.PercentComplete != nil {
		t.Percent = *d.PercentComplete
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z07:00"} { // DMTF's mockups omit the seconds
		if st, err := time.Parse(layout, d.StartTime); err == nil {
			t.StartTime = st
			break
		}
	}
	if d.Payload != nil {
		t.Payload = strings.TrimSpace(d.Payload.TargetURI + " " + d.Payload.JSONBody)
	}
	return t
}

// Task reads a task: its Task resource, or its task monitor. A monitor
// answers 202 while the task runs (with the Task in the body, or none)
// and the operation's own answer once it is done; a Task resource always
// has TaskState. A task the BMC has forgotten (404, after its own reset)
// is an error of KindNotFound.
func (c *Client) Task(ctx context.Context, uri string) (Task, error) {
	op := "reading task " + uri
	api, err := c.gf(ctx)
	if err != nil {
		return Task{}, err
	}
	resp, err := api.Get(uri)
	if err != nil {
		return Task{}, c.wrap(op, err)
	}
	defer closeBody(resp)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Task{}, c.wrap(op, err)
	}
	return parseTask(uri, resp.StatusCode, body)
}

// parseTask reads a task monitor's or Task resource's answer.
func parseTask(uri string, status int, body []byte) (Task, error) {
	var d taskDoc
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &d); err != nil && status != http.StatusNoContent {
			return Task{}, fmt.Errorf("reading task %s: expected a Task, found %d bytes that are not JSON: %w", uri, len(body), err)
		}
	}
	t := d.task(uri)
	if d.TaskState != "" {
		return t, nil
	}
	if status == http.StatusAccepted {
		t.State = "Running"
		return t, nil
	}
	// The monitor's final answer: the operation's own response.
	t.State, t.URI = "Completed", uri
	if se := errorBody(body); se != nil {
		t.State, t.Messages = "Exception", redfishMessages(se)
	}
	return t, nil
}

// Tasks lists the BMC's tasks (TaskService/Tasks), newest last as the BMC
// lists them. A resumed campaign looks here for an update it may have
// started before it stopped.
func (c *Client) Tasks(ctx context.Context) ([]Task, error) {
	const op = "listing tasks"
	api, err := c.gf(ctx)
	if err != nil {
		return nil, err
	}
	col, err := schemas.GetCollection(api, "/redfish/v1/TaskService/Tasks")
	if err != nil {
		return nil, c.wrap(op, err)
	}
	var out []Task
	for _, l := range col.ItemLinks {
		t, err := c.Task(ctx, l)
		if IsKind(err, KindNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Reachable reports whether the BMC answers an authenticated request now
// (after its own reset it refuses connections, answers 503, or has lost
// the session: the client logs in again by itself).
func (c *Client) Reachable(ctx context.Context) error {
	api, err := c.gf(ctx)
	if err != nil {
		return err
	}
	resp, err := api.Get("/redfish/v1/UpdateService")
	closeBody(resp)
	return c.wrap("checking the BMC answers", err)
}
