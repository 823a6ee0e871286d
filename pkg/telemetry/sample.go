// Package telemetry keeps watching machines after they are ready: it polls
// every enrolled BMC on an interval (a service under serve's supervisor),
// keeps each machine's last readings and 5-minute power and temperature
// aggregates, judges the readings against the recipe's alert limits with
// a hold time and hysteresis, delivers alerts (events, a webhook, an
// Alertmanager), exports current readings to Prometheus, and answers the
// power and cost report. Long history belongs to Prometheus; the store
// keeps only what ingot's own decisions and reports need.
//
// The package reads BMCs through Reader (cmd/ingot adapts pkg/bmc) and
// never writes a machine record: alert transitions go to the fleet's event
// log through Events.
package telemetry

import (
	"time"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Sample is one poll of one machine's BMC, as telemetry judges it.
type Sample struct {
	Machine string    `json:"machine"` // machine ID
	Time    time.Time `json:"time"`
	// Up is false when the BMC did not answer; Err says why.
	Up      bool   `json:"up"`
	Err     string `json:"error,omitempty"`
	PowerOn bool   `json:"power_on"`
	// Watts is the node's draw; 0 unknown (0 W while on is a sensor fault,
	// never a reading: Problems says so).
	Watts          float64 `json:"watts,omitempty"`
	PSUInputWatts  float64 `json:"psu_input_watts,omitempty"`
	PSUOutputWatts float64 `json:"psu_output_watts,omitempty"`
	// PSURedundancyLost: a supply failed or is absent, or the BMC says the
	// redundancy is lost.
	PSURedundancyLost bool `json:"psu_redundancy_lost,omitempty"`
	// Temperatures in °C; 0 unknown.
	InletC   float64 `json:"inlet_c,omitempty"`
	ExhaustC float64 `json:"exhaust_c,omitempty"`
	CPUMaxC  float64 `json:"cpu_max_c,omitempty"`
	GPUMaxC  float64 `json:"gpu_max_c,omitempty"`
	// FansFailed, DrivesPredicted and GPUsUnhealthy name the parts.
	FansFailed      []string `json:"fans_failed,omitempty"`
	DrivesPredicted []string `json:"drives_predicted_failure,omitempty"`
	GPUsUnhealthy   []string `json:"gpus_unhealthy,omitempty"`
	// MemCorrectable is the BMC's running count of correctable memory
	// errors; -1 unknown.
	MemCorrectable   int64    `json:"mem_correctable"`
	MemUncorrectable int64    `json:"mem_uncorrectable"`
	Path             string   `json:"path,omitempty"` // the Redfish path that answered
	Problems         []string `json:"problems,omitempty"`
	// Took is how long the poll took (a slow BMC stretches its interval).
	Took time.Duration `json:"took"`
	// SEL holds the BMC event log entries that appeared since the last
	// read, one line each (the reader reads the log less often than it
	// polls: most samples have none).
	SEL []string `json:"sel,omitempty"`
}

// PSUEfficiency is output over input watts, 0 unknown.
func (s Sample) PSUEfficiency() float64 {
	if s.PSUInputWatts <= 0 || s.PSUOutputWatts <= 0 {
		return 0
	}
	return s.PSUOutputWatts / s.PSUInputWatts
}

// Limits are the alert thresholds for one machine, from its recipe.
type Limits struct {
	InletMaxC         float64
	GPUMaxC           float64
	LoadWatts         float64 // power.load_watts; 0: no watts rule
	WattsMarginPct    float64
	CorrectablePerDay int64
	For               time.Duration
}

// Defaults where a recipe is silent.
const (
	DefaultInletMaxC         = 35
	DefaultGPUMaxC           = 87
	DefaultWattsMarginPct    = 10
	DefaultCorrectablePerDay = 100
	DefaultFor               = 5 * time.Minute
)

// LimitsOf reads a recipe's alerts and power sections; nil recipe: the
// defaults, no watts rule.
func LimitsOf(r *recipe.Recipe) Limits {
	l := Limits{InletMaxC: DefaultInletMaxC, GPUMaxC: DefaultGPUMaxC, WattsMarginPct: DefaultWattsMarginPct,
		CorrectablePerDay: DefaultCorrectablePerDay, For: DefaultFor}
	if r == nil {
		return l
	}
	a := r.Alerts
	if a.InletCelsiusMax > 0 {
		l.InletMaxC = float64(a.InletCelsiusMax)
	}
	if a.GPUCelsiusMax > 0 {
		l.GPUMaxC = float64(a.GPUCelsiusMax)
	}
	if a.WattsMarginPct > 0 {
		l.WattsMarginPct = float64(a.WattsMarginPct)
	}
	if a.CorrectablePerDay > 0 {
		l.CorrectablePerDay = int64(a.CorrectablePerDay)
	}
	if d := time.Duration(a.For); d > 0 {
		l.For = d
	}
	l.LoadWatts = float64(r.Power.LoadWatts)
	return l
}
