package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// SetDrillCandidate marks (or unmarks) a machine a restore drill may wipe.
func (c *Client) SetDrillCandidate(ctx context.Context, idOrName string, on bool) (*machine.Machine, error) {
	var m machine.Machine
	_, err := c.do(ctx, http.MethodPut, "/api/v1/machines/"+url.PathEscape(idOrName)+"/drill-candidate", wire.DrillCandidateRequest{Candidate: on}, &m)
	return &m, err
}

// StartDrill starts a restore drill; the answer is its reimage job.
func (c *Client) StartDrill(ctx context.Context, req wire.DrillRequest) (*wire.Job, error) {
	var j wire.Job
	_, err := c.do(ctx, http.MethodPost, "/api/v1/drills", req, &j)
	return &j, err
}

// Readiness lists each class's last drill and whether it is scale-ready.
func (c *Client) Readiness(ctx context.Context) ([]wire.RecipeReadiness, error) {
	var out []wire.RecipeReadiness
	_, err := c.do(ctx, http.MethodGet, "/api/v1/recipes/readiness", nil, &out)
	return out, err
}

// Evidence streams a job's evidence bundle (.tar.gz) into w.
func (c *Client) Evidence(ctx context.Context, jobID string, w io.Writer) (int64, error) {
	path := "/api/v1/jobs/" + url.PathEscape(jobID) + "/evidence"
	resp, err := c.send(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, &Error{Server: c.base, Method: http.MethodGet, Path: path, Status: resp.StatusCode, Message: message(data)}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, &Error{Server: c.base, Method: http.MethodGet, Path: path, Status: resp.StatusCode, Message: fmt.Sprintf("the bundle was cut short after %d bytes: %v", n, err)}
	}
	return n, nil
}
