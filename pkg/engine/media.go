package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Media gives the agent's boot CD to machines whose recipe boots the agent
// from the BMC's virtual media (os.agent.boot: virtual-media), where PXE is
// impossible. pkg/serve's VirtualMedia implements it.
type Media interface {
	// AgentMedia returns the URL (http or https, which the BMC fetches) of
	// the boot CD of job jobID for machine m under recipe r, building the
	// CD if needed. The CD boots the recipe's agent kernel and initrd with
	// its command line. Asked again for the same job (a retried BMC step)
	// it SHOULD return the same URL; once the job has ended the URL MUST
	// no longer serve the CD.
	AgentMedia(ctx context.Context, m *machine.Machine, r *recipe.Recipe, jobID string) (string, error)
}

// bootFromMedia boots the agent from the job's boot CD: whatever an
// earlier attempt left in the drive is ejected (BMCs refuse to insert over
// an inserted image), the CD inserted, a one-time boot override Cd set,
// and the machine power-cycled. The agent then asks for its boot
// credential by MAC, under the same rules as an iPXE script
// (pkg/agentauth): nothing secret is on the CD.
func (e *Engine) bootFromMedia(ctx context.Context, b BMC, m *machine.Machine, r *recipe.Recipe) error {
	if e.media == nil {
		return errors.New("os.agent.boot is virtual-media, and this server builds no boot CDs")
	}
	j, err := e.activeJob(ctx, m.ID)
	if err != nil {
		return fmt.Errorf("the boot CD is built for a job: %w", err)
	}
	url, err := e.media.AgentMedia(ctx, m, r, j.ID)
	if err != nil {
		return fmt.Errorf("building the agent's boot CD: %w", err)
	}
	if err := b.EjectMedia(ctx); err != nil {
		return fmt.Errorf("ejecting virtual media before inserting the boot CD: %w", err)
	}
	if err := b.InsertMedia(ctx, url); err != nil {
		return fmt.Errorf("inserting the boot CD as virtual media: %w", err)
	}
	if err := b.SetBootOverride(ctx, "Cd", "", true); err != nil {
		return fmt.Errorf("setting one-time boot from virtual media: %w", err)
	}
	if err := b.PowerCycle(ctx); err != nil {
		return fmt.Errorf("power cycle: %w", err)
	}
	e.event(ctx, m.ID, "bmc.boot", "boot CD inserted as virtual media, one-time boot from it set, power cycled", map[string]string{"job": j.ID})
	return nil
}

// ejectAgentMedia takes the boot CD out at hand-off, so that no later boot
// finds the agent in the drive. A BMC that will not eject leaves an event,
// not a failed job: the job's CD stops being served when the job ends.
func (e *Engine) ejectAgentMedia(ctx context.Context, b BMC, m *machine.Machine, r *recipe.Recipe) {
	if !r.OS.Agent.VirtualMedia() {
		return
	}
	if err := b.EjectMedia(ctx); err != nil {
		e.event(ctx, m.ID, "bmc.media", "the boot CD could not be ejected (the BMC keeps it inserted): "+err.Error(), nil)
		return
	}
	e.event(ctx, m.ID, "bmc.media", "boot CD ejected", nil)
}
