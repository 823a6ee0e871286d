package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Notifier delivers an alert transition somewhere.
type Notifier interface {
	Name() string
	Notify(ctx context.Context, t Transition) error
}

// Webhook POSTs each transition as JSON: {"status": "firing"|"resolved",
// "alert": Alert, "message": text}.
type Webhook struct {
	URL  string
	HTTP *http.Client // default: 10 s timeout
}

func (w Webhook) Name() string { return "webhook " + w.URL }

func (w Webhook) Notify(ctx context.Context, t Transition) error {
	status := "resolved"
	if t.Fired {
		status = "firing"
	}
	return post(ctx, w.HTTP, w.URL, map[string]any{"status": status, "alert": t.Alert, "message": t.Message()})
}

// Alertmanager posts to an Alertmanager's (or a compatible receiver's)
// POST /api/v2/alerts: labels alertname, machine, rack, recipe, severity;
// annotations summary, reading, threshold, action; endsAt set when the
// alert resolved.
type Alertmanager struct {
	URL  string // e.g. http://alertmanager:9093
	HTTP *http.Client
}

func (a Alertmanager) Name() string { return "alertmanager " + a.URL }

func (a Alertmanager) Notify(ctx context.Context, t Transition) error {
	al := t.Alert
	labels := map[string]string{"alertname": al.Rule, "machine": al.Name, "severity": al.Severity, "source": "ingot"}
	if al.Rack != "" {
		labels["rack"] = al.Rack
	}
	if al.Recipe != "" {
		labels["recipe"] = al.Recipe
	}
	body := map[string]any{
		"labels":      labels,
		"annotations": map[string]string{"summary": al.Summary, "reading": al.Reading, "threshold": al.Threshold, "action": al.Action, "description": t.Message()},
		"startsAt":    al.FiredAt.UTC().Format(time.RFC3339),
	}
	if !t.Fired {
		body["endsAt"] = time.Now().UTC().Format(time.RFC3339)
	}
	return post(ctx, a.HTTP, strings.TrimRight(a.URL, "/")+"/api/v2/alerts", []any{body})
}

func post(ctx context.Context, hc *http.Client, url string, v any) error {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
