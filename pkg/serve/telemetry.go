package serve

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// newTelemetry builds the BMC poller over the fleet's machines and
// credentials, reading through pool (one session per BMC, shared with the
// engine and inspect); alerts and new BMC log entries become events on
// the machine.
func newTelemetry(cfg Config, st store.TelemetryStore, fl *fleet.Service, recipes func(string) (*recipe.Recipe, error), pool *bmc.Pool, log *slog.Logger, mine func(string) bool) (*telemetry.Service, error) {
	var notify []telemetry.Notifier
	if cfg.AlertWebhook != "" {
		notify = append(notify, telemetry.Webhook{URL: cfg.AlertWebhook})
	}
	if cfg.AlertmanagerURL != "" {
		notify = append(notify, telemetry.Alertmanager{URL: cfg.AlertmanagerURL})
	}
	return telemetry.New(telemetry.Config{
		Machines: func(ctx context.Context) ([]machine.Machine, error) { return fl.List(ctx, fleet.Filter{}) },
		Read:     telemetry.BMCReader(pool, fl.Credentials, telemetry.NewSELReader(telemetry.SELEvery, nil), log),
		Recipes:  recipes,
		Event:    func(ctx context.Context, id, msg string) { fl.Note(ctx, id, "alert", "telemetry", msg) },
		Note:     fl.Note,
		SEL: func(ctx context.Context, id string, entries []string) {
			fl.Note(ctx, id, "bmc.sel", "telemetry", selMessage(entries))
		},
		Notify:   notify,
		Interval: cfg.TelemetryInterval,
		Logger:   log.With("service", "telemetry"),
		Racks:    racksIn(cfg.Recipes, log),
		Store:    st,
		Mine:     mine,
	})
}

// selMessage is the event of new BMC log entries: the first five, and how
// many more.
func selMessage(entries []string) string {
	msg := fmt.Sprintf("BMC event log: %d new entries: %s", len(entries), strings.Join(entries[:min(len(entries), 5)], "; "))
	if len(entries) > 5 {
		msg += fmt.Sprintf("; and %d more (ingot job evidence or the BMC's log has them all)", len(entries)-5)
	}
	return msg
}

// racksIn reads dir/racks.yaml at each use (a reviewed change takes effect
// without a restart); a broken file is logged and judged as no racks.
func racksIn(dir string, log *slog.Logger) func() []rack.Rack {
	if dir == "" {
		return nil
	}
	return func() []rack.Rack {
		rs, err := rack.Load(dir)
		if err != nil {
			log.Warn("racks.yaml not read: no rack budgets apply until it is fixed", "err", err)
		}
		return rs
	}
}

// waveCheck gates rollout waves on what telemetry measured of each
// machine while its job ran (its burn-in): peak watts and temperatures
// against its recipe's alert limits. A machine with no sample in that
// window is no pass: nothing showed it stays within its limits under load.
func waveCheck(tel *telemetry.Service) engine.WaveCheck {
	return func(_ context.Context, m *machine.Machine, r *recipe.Recipe, from, to time.Time) engine.WaveNode {
		w, inlet, gpu, n := tel.Aggregates().Peak(m.ID, from, to)
		node := engine.WaveNode{Watts: w, InletC: inlet, GPUMaxC: gpu}
		if n == 0 {
			node.Problem = fmt.Sprintf("%s: no telemetry sample between %s and %s, so nothing shows it within its limits under load (is its BMC polled? see ingot alerts and its events)",
				m.Name, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
			return node
		}
		node.Problem = telemetry.UnderLoad(telemetry.LimitsOf(r), w, inlet, gpu)
		return node
	}
}
