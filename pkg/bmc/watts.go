package bmc

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// NodeWatts reads the machine's power draw now: the sum over every
// Chassis of its Power readings (PowerControl, else EnvironmentMetrics).
// A BMC reporting 0 W (a sensor it does not fill, or a machine that is off)
// gives an error rather than a reading: 0 W while the host is on is a
// sensor fault, never a measurement.
func (c *Client) NodeWatts(ctx context.Context) (int, error) {
	api, err := c.gf(ctx)
	if err != nil {
		return 0, err
	}
	chassis, err := api.Service.Chassis()
	if err != nil {
		return 0, c.wrap("reading /redfish/v1/Chassis", err)
	}
	var r reading
	watts := 0
	for _, ch := range chassis {
		_, pw := readPower(ch, &r)
		watts += pw.Watts
	}
	if watts > 0 {
		return watts, nil
	}
	var why []string
	for _, p := range r.problems {
		why = append(why, p.Part+": "+p.Detail)
	}
	if len(why) > 0 {
		return 0, c.wrap("reading power", errors.New(strings.Join(why, "; ")))
	}
	return 0, c.wrap("reading power", fmt.Errorf("no chassis reports a power draw above 0 W (%d chassis)", len(chassis)))
}
