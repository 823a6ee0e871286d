package client

import (
	"context"
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
