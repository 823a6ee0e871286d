package bmc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stmcginnis/gofish/schemas"
)

// Boot targets ingot uses.
const (
	BootPxe      = "Pxe"
	BootUefiHTTP = "UefiHttp"
	BootHdd      = "Hdd"
	BootCd       = "Cd"
)

// SetBootOverride sets the next boot (once) or every boot (!once) to
// target; uri is the HTTP boot URI for UefiHttp. The target must be one the
// BMC lists in BootSourceOverrideTarget@Redfish.AllowableValues: the error
// names those it allows.
func (c *Client) SetBootOverride(ctx context.Context, target, uri string, once bool) error {
	op := fmt.Sprintf("setting boot override to %s", target)
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap(op, err)
	}
	if !hasBootOverride(sys.RawData) {
		return &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op,
			Err: fmt.Errorf("system %s has no Boot.BootSourceOverrideTarget: this BMC offers no boot override", sys.ODataID)}
	}
	if err := checkBootTarget(target, sys.Boot.AllowableBootSourceOverrideTargetValues); err != nil {
		return &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op, Err: err}
	}
	if uri != "" && target != BootUefiHTTP {
		return &Error{Kind: KindInvalid, Endpoint: c.cfg.Endpoint, Op: op,
			Err: errors.New("a boot URI is only meaningful with target UefiHttp")}
	}
	b := &schemas.Boot{BootSourceOverrideTarget: schemas.BootSource(target),
		BootSourceOverrideEnabled: schemas.ContinuousBootSourceOverrideEnabled}
	if once {
		b.BootSourceOverrideEnabled = schemas.OnceBootSourceOverrideEnabled
	}
	if uri != "" {
		b.HTTPBootURI = &uri
	}
	return c.wrap(op, sys.SetBoot(b))
}

// checkBootTarget is nil when target is allowed (an empty list allows all:
// the BMC did not say).
func checkBootTarget(target string, allowed []schemas.BootSource) error {
	if len(allowed) == 0 || slices.Contains(allowed, schemas.BootSource(target)) {
		return nil
	}
	return fmt.Errorf("boot target %q is not allowed by this BMC; BootSourceOverrideTarget@Redfish.AllowableValues: %v", target, allowed)
}

// BootOverride is the current boot override.
type BootOverride struct {
	Target  string   `json:"target"`
	Enabled string   `json:"enabled"` // Disabled, Once, Continuous
	URI     string   `json:"uri,omitempty"`
	Allowed []string `json:"allowed,omitempty"`
}

// GetBootOverride reads the system's boot override.
func (c *Client) GetBootOverride(ctx context.Context) (BootOverride, error) {
	sys, err := c.system(ctx)
	if err != nil {
		return BootOverride{}, c.wrap("reading boot override", err)
	}
	b := BootOverride{Target: string(sys.Boot.BootSourceOverrideTarget), Enabled: string(sys.Boot.BootSourceOverrideEnabled)}
	if sys.Boot.HTTPBootURI != nil {
		b.URI = *sys.Boot.HTTPBootURI
	}
	for _, a := range sys.Boot.AllowableBootSourceOverrideTargetValues {
		b.Allowed = append(b.Allowed, string(a))
	}
	return b, nil
}
