package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// Jobs lists one page of jobs, newest first; next is the After of the
// following page.
func (c *Client) Jobs(ctx context.Context, o ListOptions) (jobs []wire.Job, next string, err error) {
	h, err := c.do(ctx, http.MethodGet, "/api/v1/jobs"+o.query(), nil, &jobs)
	return jobs, h.Get("X-Ingot-Next"), err
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id string) (*wire.Job, error) {
	var j wire.Job
	_, err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), nil, &j)
	return &j, err
}

// CancelJob ends a running job.
func (c *Client) CancelJob(ctx context.Context, id, reason string) (*wire.Job, error) {
	var j wire.Job
	_, err := c.do(ctx, http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/cancel", wire.CancelRequest{Reason: reason}, &j)
	return &j, err
}

// Reimage starts reimage jobs (or, DryRun, plans them). The answer holds
// one result per machine, also when every one of them failed (HTTP 422).
func (c *Client) Reimage(ctx context.Context, req wire.ReimageRequest) ([]wire.ReimageResult, error) {
	var out []wire.ReimageResult
	_, err := c.do(ctx, http.MethodPost, "/api/v1/reimage", req, &out, http.StatusUnprocessableEntity)
	return out, err
}

// Rollout starts a rollout.
func (c *Client) Rollout(ctx context.Context, req wire.RolloutRequest) (*wire.Job, error) {
	var j wire.Job
	_, err := c.do(ctx, http.MethodPost, "/api/v1/rollouts", req, &j)
	return &j, err
}

// Follow polls jobs (machine name -> job ID) every interval until each has
// ended, calling change (may be nil) whenever a job's step, state or status
// moved, and returns their last states.
func (c *Client) Follow(ctx context.Context, jobs map[string]string, every time.Duration, change func(name string, j *wire.Job)) (map[string]*wire.Job, error) {
	last := map[string]*wire.Job{}
	seen := map[string]string{}
	for {
		running := 0
		for name, id := range jobs {
			if j := last[name]; j != nil && j.State != "running" {
				continue
			}
			j, err := c.Job(ctx, id)
			if err != nil {
				return last, err
			}
			last[name] = j
			if key := progressKey(j); key != seen[name] && change != nil {
				seen[name] = key
				change(name, j)
			}
			if j.State == "running" {
				running++
			}
		}
		if running == 0 {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(every):
		}
	}
}

// progressKey changes whenever a job's state, step or progress moves.
func progressKey(j *wire.Job) string {
	b, _ := json.Marshal(struct {
		State, Step string
		Reimage     *wire.ReimageStatus
		Rollout     *wire.RolloutStatus
	}{j.State, j.Step, j.Reimage, j.Rollout})
	return string(b)
}
