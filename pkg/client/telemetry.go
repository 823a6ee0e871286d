package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// Alerts lists the pending and firing telemetry alerts.
func (c *Client) Alerts(ctx context.Context) ([]wire.Alert, error) {
	var out []wire.Alert
	_, err := c.do(ctx, http.MethodGet, "/api/v1/alerts", nil, &out)
	return out, err
}

// Silence silences one machine's alert of one rule.
func (c *Client) Silence(ctx context.Context, req wire.SilenceRequest) (*wire.Silence, error) {
	var out wire.Silence
	if _, err := c.do(ctx, http.MethodPost, "/api/v1/alerts/silences", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Silences lists the silences in force.
func (c *Client) Silences(ctx context.Context) ([]wire.Silence, error) {
	var out []wire.Silence
	_, err := c.do(ctx, http.MethodGet, "/api/v1/alerts/silences", nil, &out)
	return out, err
}

// Readings lists every polled machine's last BMC readings.
func (c *Client) Readings(ctx context.Context) ([]wire.Reading, error) {
	var out []wire.Reading
	_, err := c.do(ctx, http.MethodGet, "/api/v1/readings", nil, &out)
	return out, err
}

// PowerReport asks the power and cost report (window 0: the server's
// default 24h; tariff, pue 0: racks.yaml's; rack "": all).
func (c *Client) PowerReport(ctx context.Context, window time.Duration, rack string, tariff, pue float64) (*wire.PowerReport, error) {
	q := url.Values{}
	if window > 0 {
		q.Set("window", window.String())
	}
	if rack != "" {
		q.Set("rack", rack)
	}
	if tariff > 0 {
		q.Set("tariff", strconv.FormatFloat(tariff, 'f', -1, 64))
	}
	if pue > 0 {
		q.Set("pue", strconv.FormatFloat(pue, 'f', -1, 64))
	}
	var out wire.PowerReport
	_, err := c.do(ctx, http.MethodGet, "/api/v1/power/report?"+q.Encode(), nil, &out)
	return &out, err
}

// PlanCapacity asks what count more servers of recipe would draw and cost
// per month at utilization (0: the server's default).
func (c *Client) PlanCapacity(ctx context.Context, recipe string, count int, utilization, tariff, pue float64) (*wire.CapacityPlan, error) {
	q := url.Values{"recipe": {recipe}, "count": {strconv.Itoa(count)}}
	for k, v := range map[string]float64{"utilization": utilization, "tariff": tariff, "pue": pue} {
		if v > 0 {
			q.Set(k, strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	var out wire.CapacityPlan
	_, err := c.do(ctx, http.MethodGet, "/api/v1/plan/capacity?"+q.Encode(), nil, &out)
	return &out, err
}
