package engine

import (
	"context"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// bootAgent boots the machine into the agent for a job's bmc step. A warm
// reimage's first attempt asks the installed OS to kexec into the agent
// (Config.Warm): no power cycle, no POST. When the node does not take the
// request (it is down, runs no service, or refuses), or on any later
// attempt, the BMC boots it from the network as always (after waiting
// for the rack's start-up margin, which a warm attempt skips).
func (e *Engine) bootAgent(ctx, bctx context.Context, jobID string, m *machine.Machine, r *recipe.Recipe, warmTry bool) error {
	if warmTry {
		err := e.warm(bctx, m, jobID)
		how := "kexec"
		if err != nil {
			how = "fell back to the BMC: " + err.Error()
		}
		_, _ = e.advance(ctx, jobID, StepBMC, "", 0, func(st *ReimageStatus) { st.Warm = how })
		if err == nil {
			e.event(ctx, m.ID, "warm", "warm reimage: the installed OS took the signed request and kexecs into the agent (no power cycle, no POST)", map[string]string{"job": jobID})
			return nil
		}
		e.event(ctx, m.ID, "warm", "warm reimage: "+how, map[string]string{"job": jobID})
		if err := e.startSlot(ctx, m, r); err != nil {
			return err
		}
	}
	return e.bmcProvision(bctx, m, r)
}
