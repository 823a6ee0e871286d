package bmc

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// system returns the System power, boot and BIOS act on: Config.SystemID,
// else the first in the Systems collection. Its URI is found once and
// remembered, so polling costs one GET.
func (c *Client) system(ctx context.Context) (*schemas.ComputerSystem, error) {
	api, err := c.gf(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	uri := c.sysURI
	c.mu.Unlock()
	if uri == "" {
		if uri, err = c.findSystemOnce(api); err != nil {
			return nil, err
		}
	}
	sys, err := schemas.GetComputerSystem(api, uri)
	return sys, c.wrap("reading "+uri, err)
}

// findSystemOnce finds the System's URI and remembers it; concurrent first
// callers (a shared client) wait for one search.
func (c *Client) findSystemOnce(api *gofish.APIClient) (string, error) {
	c.finding.Lock()
	defer c.finding.Unlock()
	c.mu.Lock()
	uri := c.sysURI
	c.mu.Unlock()
	if uri != "" {
		return uri, nil
	}
	uri, err := c.findSystem(api)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.sysURI = uri
	c.mu.Unlock()
	return uri, nil
}

// findSystem picks the System's URI from the Systems collection.
func (c *Client) findSystem(api *gofish.APIClient) (string, error) {
	col, err := schemas.GetCollection(api, "/redfish/v1/Systems")
	if err != nil {
		return "", c.wrap("reading /redfish/v1/Systems", err)
	}
	uri, err := pickSystem(col.ItemLinks, c.cfg.SystemID)
	if err != nil {
		return "", &Error{Kind: KindNotFound, Endpoint: c.cfg.Endpoint, Op: "choosing the system", Err: err}
	}
	return uri, nil
}

// pickSystem chooses among the Systems collection's members: the one
// whose Id is systemID, else the first.
func pickSystem(links []string, systemID string) (string, error) {
	if len(links) == 0 {
		return "", errors.New("the Systems collection is empty")
	}
	if systemID == "" {
		return links[0], nil
	}
	for _, l := range links {
		if path.Base(l) == systemID {
			return l, nil
		}
	}
	return "", fmt.Errorf("system %q not found; the BMC has %v", systemID, links)
}

// PowerState returns the system's power state: On, Off, PoweringOn, ...
func (c *Client) PowerState(ctx context.Context) (string, error) {
	sys, err := c.system(ctx)
	if err != nil {
		return "", c.wrap("reading power state", err)
	}
	return string(sys.PowerState), nil
}

// reset posts a ComputerSystem.Reset of the first type in prefer the BMC
// allows. It returns the type used.
func (c *Client) reset(ctx context.Context, op string, sys *schemas.ComputerSystem, prefer ...schemas.ResetType) (schemas.ResetType, error) {
	allowed, err := sys.GetSupportedResetTypes()
	if err != nil {
		c.log.Debug("bmc reset ActionInfo unreadable; trying the preferred type", "bmc", c.cfg.Endpoint, "err", err)
	}
	rt := prefer[0]
	if len(allowed) > 0 {
		rt = ""
		for _, p := range prefer {
			if slices.Contains(allowed, p) {
				rt = p
				break
			}
		}
		if rt == "" {
			return "", &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op,
				Err: fmt.Errorf("the BMC allows ResetType %v, none of %v", allowed, prefer)}
		}
	}
	if _, err := sys.Reset(rt); err != nil {
		return rt, c.wrap(fmt.Sprintf("%s: ResetType %s", op, rt), err)
	}
	return rt, nil
}

// PowerOn turns the system on (no-op when it is already on).
func (c *Client) PowerOn(ctx context.Context) error {
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap("power on", err)
	}
	if sys.PowerState == schemas.OnPowerState {
		return nil
	}
	_, err = c.reset(ctx, "power on", sys, schemas.OnResetType, schemas.ForceOnResetType, schemas.PushPowerButtonResetType)
	return err
}

// PowerOff shuts the system down gracefully and forces it off when it is
// still on after Config.PowerOffTimeout (or ctx's deadline, if sooner).
func (c *Client) PowerOff(ctx context.Context) error {
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap("power off", err)
	}
	if sys.PowerState == schemas.OffPowerState {
		return nil
	}
	rt, err := c.reset(ctx, "power off", sys, schemas.GracefulShutdownResetType, schemas.ForceOffResetType)
	if err != nil {
		return err
	}
	if rt == schemas.GracefulShutdownResetType {
		wctx, cancel := context.WithTimeout(ctx, c.cfg.PowerOffTimeout)
		err := c.waitPower(wctx, schemas.OffPowerState)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return c.wrap("power off: waiting for the graceful shutdown", ctx.Err())
		}
		c.log.Info("bmc graceful shutdown timed out; forcing off", "bmc", c.cfg.Endpoint, "after", c.cfg.PowerOffTimeout)
		if sys, err = c.system(ctx); err != nil {
			return c.wrap("power off", err)
		}
		if _, err := c.reset(ctx, "power off (forced after the graceful timeout)", sys, schemas.ForceOffResetType); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.PowerOffTimeout)
	defer cancel()
	return c.wrap("power off: waiting for Off after ForceOff", c.waitPower(wctx, schemas.OffPowerState))
}

// PowerCycle power-cycles a running system (PowerCycle, ForceRestart, or
// ForceOff then On) and powers on one that is off.
func (c *Client) PowerCycle(ctx context.Context) error {
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap("power cycle", err)
	}
	if sys.PowerState == schemas.OffPowerState {
		_, err := c.reset(ctx, "power cycle (system was off: on)", sys, schemas.OnResetType, schemas.ForceOnResetType)
		return err
	}
	_, err = c.reset(ctx, "power cycle", sys, schemas.PowerCycleResetType, schemas.ForceRestartResetType)
	if !IsKind(err, KindUnsupported) {
		return err
	}
	if _, err := c.reset(ctx, "power cycle: off", sys, schemas.ForceOffResetType); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.PowerOffTimeout)
	err = c.waitPower(wctx, schemas.OffPowerState)
	cancel()
	if err != nil {
		return c.wrap("power cycle: waiting for Off", err)
	}
	if sys, err = c.system(ctx); err != nil {
		return c.wrap("power cycle", err)
	}
	_, err = c.reset(ctx, "power cycle: on", sys, schemas.OnResetType, schemas.ForceOnResetType)
	return err
}

// waitPower polls until the system reports want or ctx ends.
func (c *Client) waitPower(ctx context.Context, want schemas.PowerState) error {
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		sys, err := c.system(ctx)
		if err == nil && sys.PowerState == want {
			return nil
		}
		if err != nil && !IsKind(err, KindBusy) && !IsKind(err, KindServer) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("power state still not %s: %w", want, ctx.Err())
		case <-t.C:
		}
	}
}
