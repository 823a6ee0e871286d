package client

import (
	"context"
	"net/http"
	"net/url"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// FirmwarePlan plans the machines named (recipes stand for their machines)
// from their BMCs now.
func (c *Client) FirmwarePlan(ctx context.Context, targets []string) ([]wire.FirmwarePlan, error) {
	q := url.Values{"target": targets}
	var out []wire.FirmwarePlan
	_, err := c.do(ctx, http.MethodGet, "/api/v1/firmware/plan?"+q.Encode(), nil, &out)
	return out, err
}

// FirmwareApply starts a firmware campaign.
func (c *Client) FirmwareApply(ctx context.Context, req wire.FirmwareApplyRequest) (*wire.Job, error) {
	var j wire.Job
	_, err := c.do(ctx, http.MethodPost, "/api/v1/firmware/apply", req, &j)
	return &j, err
}
