package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/stmcginnis/gofish/schemas"
)

// Apply times a firmware update may need (recipe.ApplyTime's values).
const (
	ApplyImmediate = "immediate"
	ApplyOnReset   = "on-reset"
	ApplyACCycle   = "ac-cycle"
)

// ResetForFirmware gives staged firmware what it needs to take effect:
// on-reset restarts the host (ForceRestart, or On when it is off);
// ac-cycle removes power and gives it back (FullPowerCycle where the BMC
// allows it, else ForceOff, wait for Off, On). immediate needs nothing.
func (c *Client) ResetForFirmware(ctx context.Context, applyTime string) error {
	op := "resetting for firmware (" + applyTime + ")"
	if applyTime == ApplyImmediate || applyTime == "" {
		return nil
	}
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap(op, err)
	}
	off := sys.PowerState == schemas.OffPowerState
	switch {
	case applyTime == ApplyOnReset && off:
		_, err = c.reset(ctx, op, sys, schemas.OnResetType, schemas.ForceOnResetType)
		return err
	case applyTime == ApplyOnReset:
		_, err = c.reset(ctx, op, sys, schemas.ForceRestartResetType, schemas.PowerCycleResetType, schemas.GracefulRestartResetType)
		return err
	case applyTime != ApplyACCycle:
		return &Error{Kind: KindInvalid, Endpoint: c.cfg.Endpoint, Op: op, Err: errors.New("expected immediate, on-reset or ac-cycle")}
	}
	if allowed, _ := sys.GetSupportedResetTypes(); slices.Contains(allowed, schemas.FullPowerCycleResetType) {
		_, err = c.reset(ctx, op, sys, schemas.FullPowerCycleResetType)
		return err
	}
	if !off {
		if _, err := c.reset(ctx, op+": off", sys, schemas.ForceOffResetType); err != nil {
			return err
		}
		if err := c.waitPower(ctx, schemas.OffPowerState); err != nil {
			return c.wrap(op+": waiting for Off", err)
		}
		if sys, err = c.system(ctx); err != nil {
			return c.wrap(op, err)
		}
	}
	_, err = c.reset(ctx, op+": on", sys, schemas.OnResetType, schemas.ForceOnResetType)
	return err
}

// managerImages is the part of a Manager that shows its firmware slots.
type managerImages struct {
	ID    string `json:"@odata.id"`
	Links struct {
		Active struct {
			ID string `json:"@odata.id"`
		} `json:"ActiveSoftwareImage"`
		Images []struct {
			ID string `json:"@odata.id"`
		} `json:"SoftwareImages"`
	} `json:"Links"`
	Actions struct {
		Reset struct {
			Target string `json:"target"`
		} `json:"#Manager.Reset"`
	} `json:"Actions"`
}

// Rollback restores the image the BMC kept before the last update of
// target, where it keeps one: an OEM rollback action of the UpdateService
// (us.Rollback), or a second firmware slot of the BMC itself (a Manager
// whose Links.SoftwareImages lists an image besides the active one:
// ActiveSoftwareImage is set to it and the Manager reset). Redfish has no
// standard rollback; a BMC with neither gets KindUnsupported. The answer
// may name a task to follow, as an update's does.
func (c *Client) Rollback(ctx context.Context, us UpdateService, target string) (UpdateStart, error) {
	op := "rolling back " + target
	api, err := c.gf(context.WithValue(ctx, postKey{}, true))
	if err != nil {
		return UpdateStart{}, err
	}
	if us.Rollback != "" {
		resp, err := api.Post(us.Rollback, map[string]any{"Targets": []string{target}})
		if err != nil {
			return UpdateStart{}, c.wrap(op, err)
		}
		defer closeBody(resp)
		return startAnswer("rollback", resp), nil
	}
	mgrs, err := api.Service.Managers()
	if err != nil {
		return UpdateStart{}, c.wrap(op, err)
	}
	for _, m := range mgrs {
		var doc managerImages
		if json.Unmarshal(m.RawData, &doc) != nil || len(doc.Links.Images) < 2 || doc.Links.Active.ID != target {
			continue
		}
		for _, img := range doc.Links.Images {
			if img.ID == doc.Links.Active.ID {
				continue
			}
			patch := map[string]any{"Links": map[string]any{"ActiveSoftwareImage": map[string]string{"@odata.id": img.ID}}}
			resp, err := api.Patch(doc.ID, patch)
			closeBody(resp)
			if err == nil && doc.Actions.Reset.Target != "" {
				resp, err = api.Post(doc.Actions.Reset.Target, map[string]any{"ResetType": "GracefulRestart"})
				closeBody(resp)
			}
			return UpdateStart{Method: "second-slot"}, c.wrap(op+": activating "+img.ID, err)
		}
	}
	return UpdateStart{}, &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op,
		Err: fmt.Errorf("the BMC keeps no previous image of %s: no OEM rollback action on the UpdateService and no second firmware slot", target)}
}
