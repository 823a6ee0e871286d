package telemetry

import _ "embed"

// Dashboard is a Grafana dashboard over the metrics the collector exports
// (power per node and rack, inlet and GPU temperatures, PSU efficiency,
// fans and PSUs, BMC polls, firing alerts, memory errors), for sites that
// keep ingot's readings in Prometheus: `ingot power dashboard > ingot.json`.
//
//go:embed grafana-dashboard.json
var Dashboard []byte
