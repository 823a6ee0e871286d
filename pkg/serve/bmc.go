package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// bmcDialers reach machines' BMCs through one shared pool (one session per
// BMC, for the engine, inspect, the inventory refresh and telemetry), with
// the credentials each machine's reference names under the fleet's policy
// (set once the fleet is built: the fleet dials through it too).
type bmcDialers struct {
	pool  *bmc.Pool
	creds func() credential.Policy
	log   *slog.Logger
}

// engine hands out the machine's pooled session as the engine's BMC.
func (d *bmcDialers) engine(ctx context.Context, m *machine.Machine) (engine.BMC, error) {
	c, err := d.pooled(ctx, m)
	if err != nil {
		return nil, err
	}
	return engineBMC{c: c}, nil
}

// inspect hands out the machine's pooled session as the fleet's reader.
func (d *bmcDialers) inspect(ctx context.Context, m *machine.Machine) (fleet.BMCReader, error) {
	c, err := d.pooled(ctx, m)
	if err != nil {
		return nil, err
	}
	return engineBMC{c: c}, nil
}

// rotate opens a rotation's own session with the password it names; when
// it is done the pooled session (logged in with the old password) is
// dropped, so the next use logs in afresh instead of failing a renewal
// with a password the BMC no longer takes.
func (d *bmcDialers) rotate(ctx context.Context, m *machine.Machine, user, pass string) (fleet.BMCRotator, error) {
	c, err := bmc.Dial(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass,
		Insecure: m.BMC.Insecure, Logger: d.log.With("bmc", m.BMC.Endpoint)})
	if err != nil {
		return nil, err
	}
	return rotatingBMC{Client: c, forget: func() error { return d.pool.Forget(m.BMC.Endpoint, user) }}, nil
}

// pooled is the machine's shared session, logged in with the credentials
// its reference names, where the server's policy allows.
func (d *bmcDialers) pooled(ctx context.Context, m *machine.Machine) (*bmc.Client, error) {
	if m.BMC.Endpoint == "" {
		return nil, fmt.Errorf("machine %s has no BMC endpoint", m.Name)
	}
	user, pass, err := d.creds().Resolve(m)
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", m.Name, err)
	}
	return d.pool.Get(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass,
		Insecure: m.BMC.Insecure, Logger: d.log.With("bmc", m.BMC.Endpoint)})
}

// rotatingBMC is a rotation's own session; closing it also drops the
// pooled one.
type rotatingBMC struct {
	*bmc.Client
	forget func() error
}

func (b rotatingBMC) Close() error { return errors.Join(b.Client.Close(), b.forget()) }

// engineBMC adapts a pooled *bmc.Client to engine.BMC. Its Close leaves
// the session to the pool for the next user.
type engineBMC struct{ c *bmc.Client }

func (b engineBMC) PowerCycle(ctx context.Context) error { return b.c.PowerCycle(ctx) }
func (b engineBMC) SetBootOverride(ctx context.Context, target, uri string, once bool) error {
	return b.c.SetBootOverride(ctx, target, uri, once)
}
func (b engineBMC) ApplyBIOS(ctx context.Context, attrs map[string]any) error {
	_, err := b.c.ApplyBIOS(ctx, attrs)
	return err
}
func (b engineBMC) VerifyBIOS(ctx context.Context, want map[string]any) ([]string, error) {
	ms, err := b.c.VerifyBIOS(ctx, want)
	var out []string
	for _, m := range ms {
		out = append(out, m.String())
	}
	return out, err
}
func (b engineBMC) SetBootMode(ctx context.Context, mode string) error {
	return b.c.SetBootMode(ctx, mode)
}
func (b engineBMC) BootState(ctx context.Context) (engine.BootState, error) {
	st, err := b.c.GetBootState(ctx)
	return engine.BootState{Power: st.Power, Target: st.Target, Enabled: st.Enabled, Mode: st.Mode}, err
}
func (b engineBMC) Inventory(ctx context.Context) (machine.Inventory, error) {
	return b.c.Inventory(ctx)
}
func (b engineBMC) NodeWatts(ctx context.Context) (int, error) { return b.c.NodeWatts(ctx) }
func (b engineBMC) InsertMedia(ctx context.Context, image string) error {
	return b.c.InsertMedia(ctx, image)
}
func (b engineBMC) EjectMedia(ctx context.Context) error { return b.c.EjectMedia(ctx) }
func (b engineBMC) Close() error                         { return nil }
