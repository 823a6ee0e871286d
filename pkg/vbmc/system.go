package vbmc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// reset handles POST Systems/ID/Actions/ComputerSystem.Reset.
func (b *BMC) reset(w http.ResponseWriter, r *http.Request, p string) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, msgMalformed(err))
		return
	}
	sys := strings.TrimSuffix(p, "/Actions/ComputerSystem.Reset")
	b.mu.Lock()
	doc, ok := b.peek(sys)
	if !ok || !typeIs(doc, "ComputerSystem") {
		b.mu.Unlock()
		writeError(w, http.StatusNotFound, msgMissing(p))
		return
	}
	act, ok := action(doc, resetAction)
	if !ok {
		b.mu.Unlock()
		writeError(w, http.StatusBadRequest, msgActionNotSupported("ComputerSystem.Reset"))
		return
	}
	rt, ok := body["ResetType"].(string)
	if !ok {
		b.mu.Unlock()
		writeError(w, http.StatusBadRequest, msgMissingParam("ResetType", "ComputerSystem.Reset"))
		return
	}
	tr, err := resetTransition(rt, b.powerState(sys), b.allowable(act, "ResetType"))
	if err != nil {
		b.mu.Unlock()
		var nl errNotInList
		if errors.As(err, &nl) {
			writeError(w, http.StatusBadRequest, nl.message())
		} else {
			writeError(w, http.StatusConflict, msgConflict(err.Error()))
		}
		return
	}
	b.logReset(rt, tr)
	b.firmwarePower(tr)
	target := ""
	if tr.boot {
		target = b.bootEvent(sys)
	}
	if sys != b.powered {
		if tr.off || tr.boot {
			d, _ := b.mutable(sys)
			d["PowerState"] = map[bool]string{true: "On", false: "Off"}[tr.boot]
			if tr.boot {
				d["LastResetTime"] = time.Now().UTC().Format(time.RFC3339)
			}
			b.touch(sys)
		}
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	b.mu.Unlock()
	if err := b.drive(r.Context(), tr, target); err != nil {
		b.mu.Lock()
		b.addLog(LogEntry{MessageID: "VBMC.1.0.PowerActionFailed", SensorType: "PowerUnit", Severity: "Critical",
			Message: fmt.Sprintf("The power action %s failed: %v.", rt, err)})
		b.mu.Unlock()
		writeError(w, http.StatusInternalServerError, msgInternal(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// drive carries a transition out on the Backend. A graceful power-off runs
// in the background (the guest may take minutes, as on real hardware), so
// the answer is immediate and PowerState changes when the guest is off.
func (b *BMC) drive(ctx context.Context, tr transition, target string) error {
	be := b.cfg.Backend
	// The VM must outlive the request that powered it on.
	ctx = context.WithoutCancel(ctx)
	if tr.graceful {
		go func() {
			b.driving.Lock()
			defer b.driving.Unlock()
			if err := powerOff(ctx, be, true); err != nil {
				b.log.Warn("graceful power off", "bmc", b.String(), "err", err)
				return
			}
			if tr.boot {
				if err := be.PowerOn(ctx, target); err != nil {
					b.log.Warn("power on after graceful restart", "bmc", b.String(), "err", err)
				}
			}
		}()
		return nil
	}
	b.driving.Lock()
	defer b.driving.Unlock()
	if tr.off {
		if err := powerOff(ctx, be, false); err != nil {
			return fmt.Errorf("powering off: %w", err)
		}
	}
	if tr.boot {
		if err := be.PowerOn(ctx, target); err != nil {
			return fmt.Errorf("powering on (boot %q): %w", target, err)
		}
	}
	return nil
}

// bootEvent is what happens on the BMC side when a System boots: pending
// BIOS settings are applied and a one-time boot override is consumed. It
// returns the boot target the override selects ("" for the normal order).
// b.mu held.
func (b *BMC) bootEvent(sys string) string {
	doc, _ := b.peek(sys)
	if bios := linkOf(doc, "Bios"); bios != "" {
		if n := len(b.pending[bios]); n > 0 {
			b.event("BiosSettingsApplied", "System Firmware Progress", "Pending BIOS settings were applied at boot (%d attributes).", n)
		}
		b.applyBios(bios)
	}
	boot, _ := doc["Boot"].(map[string]any)
	enabled, _ := boot["BootSourceOverrideEnabled"].(string)
	target, _ := boot["BootSourceOverrideTarget"].(string)
	if enabled != "Once" && enabled != "Continuous" || target == "None" {
		return ""
	}
	b.event("BootOverrideUsed", "System Firmware Progress", "The host boots from the boot source override %s (%s).", target, enabled)
	if enabled == "Once" {
		d, _ := b.mutable(sys)
		d["Boot"].(map[string]any)["BootSourceOverrideEnabled"] = "Disabled"
		b.touch(sys)
	}
	return target
}

// action returns the Actions entry name of doc.
func action(doc map[string]any, name string) (map[string]any, bool) {
	acts, _ := doc["Actions"].(map[string]any)
	a, ok := acts[name].(map[string]any)
	return a, ok
}

// allowable returns an action parameter's allowed values, from the action
// itself (PARAM@Redfish.AllowableValues) or from its @Redfish.ActionInfo
// resource (Gigabyte/AMI and Cray put them there). nil means not listed.
func (b *BMC) allowable(act map[string]any, param string) []string {
	if vs := stringList(act[param+"@Redfish.AllowableValues"]); vs != nil {
		return vs
	}
	info, _ := act["@Redfish.ActionInfo"].(string)
	doc, ok := b.peek(cleanPath(info))
	if !ok {
		return nil
	}
	params, _ := doc["Parameters"].([]any)
	for _, pm := range params {
		m, _ := pm.(map[string]any)
		if m["Name"] == param {
			return stringList(m["AllowableValues"])
		}
	}
	return nil
}

// stringList converts a decoded JSON array of strings (nil if v is not one).
func stringList(v any) []string {
	arr, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// linkOf returns the @odata.id of doc[name] as a tree key.
func linkOf(doc map[string]any, name string) string {
	l, _ := doc[name].(map[string]any)
	id, _ := l["@odata.id"].(string)
	return cleanPath(id)
}

// bootProps are the writable Boot properties and their allowable values
// when the mockup lists none (Redfish ComputerSystem.Boot).
var bootProps = map[string][]string{
	"BootSourceOverrideTarget": {"None", "Pxe", "Floppy", "Cd", "Usb", "Hdd", "BiosSetup", "Utilities", "Diags",
		"UefiShell", "UefiTarget", "SDCard", "UefiHttp", "RemoteDrive", "UefiBootNext", "Recovery"},
	"BootSourceOverrideEnabled":    {"Disabled", "Once", "Continuous"},
	"BootSourceOverrideMode":       {"Legacy", "UEFI"},
	"HttpBootUri":                  nil,
	"UefiTargetBootSourceOverride": nil,
	"BootNext":                     nil,
	"BootOrder":                    nil,
}

// systemProps are the other writable System properties.
var systemProps = []string{"AssetTag", "IndicatorLED", "LocationIndicatorActive", "HostName"}

// patchSystem handles PATCH Systems/ID: the Boot override (checked against
// the mockup's allowable values) and a few plain properties.
func (b *BMC) patchSystem(p string, body map[string]any) (int, *message) {
	doc, _ := b.peek(p)
	for k := range body {
		if k != "Boot" && !slices.Contains(systemProps, k) && !strings.Contains(k, "@") {
			return http.StatusBadRequest, ptr(msgPropertyNotWritable(k))
		}
	}
	if nb, ok := body["Boot"]; ok {
		want, ok := nb.(map[string]any)
		if !ok {
			return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(nb), "Boot"))
		}
		cur, _ := doc["Boot"].(map[string]any)
		if m := checkBoot(cur, want); m != nil {
			return http.StatusBadRequest, m
		}
	}
	d, _ := b.mutable(p)
	for k, v := range body {
		if strings.Contains(k, "@") {
			continue
		}
		if k != "Boot" {
			d[k] = v
			continue
		}
		cur, ok := d["Boot"].(map[string]any)
		if !ok {
			cur = map[string]any{}
			d["Boot"] = cur
		}
		for bk, bv := range v.(map[string]any) {
			if !strings.Contains(bk, "@") {
				cur[bk] = bv
			}
		}
		if _, ok := v.(map[string]any)["BootSourceOverrideTarget"]; ok {
			target, _ := cur["BootSourceOverrideTarget"].(string)
			enabled, _ := cur["BootSourceOverrideEnabled"].(string)
			b.event("BootOverrideSet", "System Event", "Boot source override set: %s (%s).", target, enabled)
		}
	}
	b.touch(p)
	return 0, nil
}

// checkBoot validates a Boot PATCH against the current Boot object. The
// override properties must be ones this System has (Cray blades have no
// override at all) and their values must be allowed. Other properties the
// System already has are accepted as they are (a client may send back the
// whole Boot object it read); annotations ("X@Redfish.AllowableValues") are
// ignored.
func checkBoot(cur, want map[string]any) *message {
	allowedTargets := stringList(cur["BootSourceOverrideTarget@Redfish.AllowableValues"])
	for k, v := range want {
		if strings.Contains(k, "@") {
			continue
		}
		std, known := bootProps[k]
		_, has := cur[k]
		_, hasAllowed := cur[k+"@Redfish.AllowableValues"]
		if k == "HttpBootUri" && slices.Contains(allowedTargets, "UefiHttp") {
			has = true
		}
		switch {
		case !has && !hasAllowed:
			return ptr(msgPropertyUnknown("Boot/" + k))
		case !known:
			continue
		case k == "BootOrder":
			if stringList(v) == nil {
				return ptr(msgTypeError(fmt.Sprint(v), "Boot/"+k))
			}
			continue
		}
		s, ok := v.(string)
		if !ok {
			if v == nil && (k == "BootNext" || k == "HttpBootUri") {
				continue
			}
			return ptr(msgTypeError(fmt.Sprint(v), "Boot/"+k))
		}
		allowed := stringList(cur[k+"@Redfish.AllowableValues"])
		if allowed == nil {
			allowed = std
		}
		if allowed != nil && !slices.Contains(allowed, s) {
			return ptr(msgValueNotInList(s, k, allowed))
		}
	}
	return nil
}
