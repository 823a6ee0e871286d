package bmc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

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
	if target == BootNone {
		return c.ClearBootOverride(ctx)
	}
	op := fmt.Sprintf("setting boot override to %s", target)
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap(op, err)
	}
	if !hasBootProperty(sys.RawData, "BootSourceOverrideTarget") {
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
	b := map[string]any{"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Continuous"}
	if once {
		b["BootSourceOverrideEnabled"] = "Once"
	}
	if uri != "" {
		b["HttpBootUri"] = uri
	}
	if c.quirk(ctx, QuirkSupermicroBootMode, facts{resource: sys.RawData}) {
		// Supermicro: without the mode in the same PATCH the one-time
		// override falls back to Legacy.
		b["BootSourceOverrideMode"] = ModeUEFI
	}
	return c.patchBoot(ctx, op, sys, b)
}

// BootNone is the override target that means "no override".
const BootNone = "None"

// ClearBootOverride ends any boot override: the system boots its own boot
// order again.
func (c *Client) ClearBootOverride(ctx context.Context) error {
	const op = "clearing the boot override"
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap(op, err)
	}
	b := map[string]any{"BootSourceOverrideTarget": BootNone, "BootSourceOverrideEnabled": "Disabled"}
	if c.quirk(ctx, QuirkILONoneTarget, facts{resource: sys.RawData}) {
		// HPE iLO refuses target None: Disabled alone ends the override.
		delete(b, "BootSourceOverrideTarget")
	}
	return c.patchBoot(ctx, op, sys, b)
}

// patchBoot PATCHes the System's Boot object (with If-Match of its
// @odata.etag where it has one).
func (c *Client) patchBoot(ctx context.Context, op string, sys *schemas.ComputerSystem, boot map[string]any) error {
	api, err := c.gf(ctx)
	if err != nil {
		return err
	}
	payload := map[string]any{"Boot": boot}
	resp, err := api.PatchWithHeaders(sys.ODataID, payload, sys.Headers())
	closeBody(resp)
	var be *Error
	if err != nil && errors.As(err, &be) &&
		c.quirk(ctx, QuirkBootSettingsIfMatch, facts{resource: sys.RawData, status: be.Status, messages: be.Messages}) {
		// Dell iDRAC 10: Boot is read-only on the System; the override goes
		// to its settings object, If-Match required.
		so := settingsObject(sys.RawData)
		var doc struct {
			ETag string `json:"@odata.etag"`
		}
		etag, gerr := getJSON(api, so, &doc)
		if gerr != nil {
			return c.wrap(op+": reading the settings object "+so, gerr)
		}
		hdr := map[string]string{"If-Match": cmp.Or(etag, doc.ETag, "*")}
		resp, err = api.PatchWithHeaders(so, payload, hdr)
		closeBody(resp)
	}
	return c.wrap(op, err)
}

func closeBody(resp *http.Response) {
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
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

// Boot modes, as Redfish's BootSourceOverrideMode names them.
const (
	ModeUEFI   = "UEFI"
	ModeLegacy = "Legacy"
)

// SetBootMode sets the firmware boot mode (UEFI or Legacy) through the
// boot override's BootSourceOverrideMode. Vendor fallback: a BMC whose Boot
// has no BootSourceOverrideMode (Dell iDRAC, HPE iLO with some firmware)
// keeps the mode in the BIOS attribute BootMode ("Uefi", or "Bios" on Dell /
// "LegacyBios" on HPE), staged like any BIOS attribute for the next reset.
func (c *Client) SetBootMode(ctx context.Context, mode string) error {
	op := "setting boot mode " + mode
	if mode != ModeUEFI && mode != ModeLegacy {
		return &Error{Kind: KindInvalid, Endpoint: c.cfg.Endpoint, Op: op, Err: errors.New("expected UEFI or Legacy")}
	}
	sys, err := c.system(ctx)
	if err != nil {
		return c.wrap(op, err)
	}
	cur := map[string]any{"BootSourceOverrideTarget": string(sys.Boot.BootSourceOverrideTarget),
		"BootSourceOverrideEnabled": string(sys.Boot.BootSourceOverrideEnabled), "BootSourceOverrideMode": mode}
	switch {
	case hasBootProperty(sys.RawData, "BootSourceOverrideMode"):
		return c.patchBoot(ctx, op, sys, cur)
	case c.quirk(ctx, QuirkSupermicroBootMode, facts{resource: sys.RawData}):
		// Supermicro takes the mode it does not advertise.
		return c.patchBoot(ctx, op, sys, cur)
	case !c.quirk(ctx, QuirkBootModeBIOS, facts{resource: sys.RawData}):
		return &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op, Err: errors.New("no way to set the boot mode")}
	}
	// Dell iDRAC, HPE iLO: the BIOS attribute BootMode, for the next reset.
	attrs, err := c.Attributes(ctx)
	if err != nil {
		return c.wrap(op, err)
	}
	mcur, ok := attrs["BootMode"].(string)
	if !ok {
		return &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op,
			Err: errors.New("the system has neither Boot.BootSourceOverrideMode nor a BootMode BIOS attribute")}
	}
	_, err = c.ApplyBIOS(ctx, map[string]any{"BootMode": biosBootMode(mode, mcur)})
	return err
}

// biosBootMode is the BootMode attribute value for mode, in the vendor's
// spelling of the current value.
func biosBootMode(mode, cur string) string {
	if mode == ModeUEFI {
		return "Uefi"
	}
	if cur == "LegacyBios" {
		return cur
	}
	if strings.EqualFold(cur, "Uefi") {
		return "LegacyBios" // HPE; Dell spells it Bios, set by hand where it differs
	}
	return cur
}

// BootState is what the engine confirms after a handoff: power, the boot
// override and the firmware boot mode.
type BootState struct {
	Power   string `json:"power"`   // On, Off, ...
	Target  string `json:"target"`  // Pxe, Hdd, None, ...
	Enabled string `json:"enabled"` // Disabled, Once, Continuous
	Mode    string `json:"mode"`    // UEFI, Legacy; "" when the BMC does not say
}

// GetBootState reads power, boot override and boot mode in one GET (the
// BIOS's BootMode attribute when the Boot object has no mode).
func (c *Client) GetBootState(ctx context.Context) (BootState, error) {
	sys, err := c.system(ctx)
	if err != nil {
		return BootState{}, c.wrap("reading boot state", err)
	}
	st := BootState{Power: string(sys.PowerState), Target: string(sys.Boot.BootSourceOverrideTarget),
		Enabled: string(sys.Boot.BootSourceOverrideEnabled), Mode: string(sys.Boot.BootSourceOverrideMode)}
	if !hasBootProperty(sys.RawData, "BootSourceOverrideMode") {
		st.Mode = ""
		if attrs, err := c.Attributes(ctx); err == nil {
			if m, ok := attrs["BootMode"].(string); ok {
				st.Mode = ModeLegacy
				if strings.EqualFold(m, "Uefi") {
					st.Mode = ModeUEFI
				}
			}
		}
	}
	return st, nil
}
