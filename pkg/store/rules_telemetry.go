package store

import (
	"fmt"
	"strings"
)

// CheckPowerDay accepts a power day (or daily summary) a backend may store:
// a machine ID without '/' and a YYYY-MM-DD day.
func CheckPowerDay(d PowerDay) error {
	if d.Machine == "" || strings.Contains(d.Machine, "/") || len(d.Day) != len("2006-01-02") {
		return fmt.Errorf("power day %q of machine %q: expected a machine ID and a YYYY-MM-DD day", d.Day, d.Machine)
	}
	return nil
}

// CheckNodeTelemetry accepts a machine's telemetry state: a machine ID
// without '/'.
func CheckNodeTelemetry(n NodeTelemetry) error {
	if n.Machine == "" || strings.Contains(n.Machine, "/") {
		return fmt.Errorf("telemetry of machine %q: expected a machine ID", n.Machine)
	}
	return nil
}
