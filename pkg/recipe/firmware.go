package recipe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Firmware pins versions, one Pin per component. A machine whose firmware
// differs from a pin is not ready (the drift check's finding is critical)
// unless the pin's policy is warn; a pin with policy update is brought to
// its version by a firmware campaign (pkg/firmware) from its package.
type Firmware struct {
	BIOS   Pin                       `json:"bios,omitzero" doc:"the system BIOS/UEFI: a version string (policy block), or a pin mapping"`
	BMC    Pin                       `json:"bmc,omitzero" doc:"the BMC's own firmware"`
	GPU    Pin                       `json:"gpu,omitzero" doc:"every GPU (VBIOS), each instance checked"`
	NIC    Pin                       `json:"nic,omitzero" doc:"NICs no hardware.nics[].firmware pins"`
	Other  map[string]Pin            `json:"other,omitempty" doc:"component name -> pin; the name is matched against the inventory's normalised component names (hgx-baseboard matches HGX_Baseboard), unless the pin names a component"`
	Policy map[string]FirmwareAction `json:"policy,omitempty" doc:"component -> update, block or warn, for pins in the string form (a pin mapping says its own policy); components: bios, bmc, gpu, nic, other.NAME"`
}

// Pin is one firmware pin. The YAML string form `bios: 1.7.2` is a Pin
// with only Version (policy block, or what firmware.policy says).
type Pin struct {
	Component      string         `json:"component,omitempty" doc:"which inventory component the pin holds: matched against the normalised name, model or SKU (NVIDIA A40, ConnectX-7, HGX_FW_GPU), never a vendor's numeric Id; default: the key (bios, bmc, gpu, nic, or the other.NAME)" pattern:"[^0-9 ]"`
	Version        string         `json:"version" doc:"the version the component must run, as the BMC or the in-band inventory reports it"`
	Package        string         `json:"package,omitempty" doc:"sha256 of the firmware package in ingot's content store (ingot firmware import FILE) that brings the component to version; one package may serve several pins (an HGX bundle)" pattern:"^[0-9a-f]{64}$"`
	ApplyTime      ApplyTime      `json:"apply_time,omitempty" doc:"what the new firmware needs to take effect: immediate, on-reset (a host reset) or ac-cycle (power off, on); default on-reset" enum:"immediate,on-reset,ac-cycle"`
	Policy         FirmwareAction `json:"policy,omitempty" doc:"update (a campaign brings the component to version), block (the machine is not ready until it is; the default) or warn (reported only)" enum:"update,block,warn"`
	AllowDowngrade bool           `json:"allow_downgrade,omitempty" doc:"true: policy update may install a version below the running one; default false (a downgrade is refused)"`
}

// FirmwareAction is what a firmware mismatch does.
type FirmwareAction string

// The firmware actions.
const (
	FirmwareUpdate FirmwareAction = "update" // a firmware campaign brings the component to the pin
	FirmwareBlock  FirmwareAction = "block"  // the machine is not ready until the firmware is at the pin
	FirmwareWarn   FirmwareAction = "warn"   // reported, does not block
)

// ApplyTime is what a firmware update needs to take effect.
type ApplyTime string

// The apply times.
const (
	ApplyImmediate ApplyTime = "immediate" // running once the BMC's task ends (a BMC resets itself)
	ApplyOnReset   ApplyTime = "on-reset"  // after a host reset (ForceRestart)
	ApplyACCycle   ApplyTime = "ac-cycle"  // after the host is powered off and on again (CPLDs, some GPU baseboards)
)

// FirmwareKeys are the fixed pin keys, in order.
func FirmwareKeys() []string { return []string{"bios", "bmc", "gpu", "nic"} }

// IsZero reports an absent pin.
func (p Pin) IsZero() bool { return p == Pin{} }

// Short reports whether the pin has only a version (the string form).
func (p Pin) Short() bool { return p.Version != "" && p == Pin{Version: p.Version} }

func (p Pin) String() string {
	if p.Short() || p.IsZero() {
		return p.Version
	}
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("version", p.Version)
	add("component", p.Component)
	add("package", p.Package)
	add("apply_time", string(p.ApplyTime))
	add("policy", string(p.Policy))
	if p.AllowDowngrade {
		add("allow_downgrade", "true")
	}
	return strings.Join(parts, " ")
}

// pinObject is Pin without its methods, for JSON.
type pinObject Pin

// MarshalJSON writes the string form for a version-only pin, so recipes
// that pin as before keep their JSON (and Digest).
func (p Pin) MarshalJSON() ([]byte, error) {
	if p.Short() || p.IsZero() {
		return json.Marshal(p.Version)
	}
	return json.Marshal(pinObject(p))
}

// UnmarshalJSON reads either form.
func (p *Pin) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*p = Pin{}
		return json.Unmarshal(b, &p.Version)
	}
	var o pinObject
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("firmware pin: expected a version string or an object: %w", err)
	}
	*p = Pin(o)
	return nil
}

// Get returns the pin of a component key: bios, bmc, gpu, nic, or
// other.NAME; ok is false for a key that names no component.
func (f Firmware) Get(key string) (Pin, bool) {
	switch key {
	case "bios":
		return f.BIOS, true
	case "bmc":
		return f.BMC, true
	case "gpu":
		return f.GPU, true
	case "nic":
		return f.NIC, true
	}
	if name, ok := strings.CutPrefix(key, "other."); ok {
		p, ok := f.Other[name]
		return p, ok
	}
	return Pin{}, false
}

// Action returns the policy of a component key: the pin's own policy,
// else firmware.policy's, else block.
func (f Firmware) Action(key string) FirmwareAction {
	if p, _ := f.Get(key); p.Policy != "" {
		return p.Policy
	}
	if a := f.Policy[key]; a != "" {
		return a
	}
	return FirmwareBlock
}

// KeyedPin is a pin and its component key.
type KeyedPin struct {
	Key string // bios, bmc, gpu, nic, other.NAME
	Pin
}

// Pins lists the pins given, fixed keys first, then other.NAME by name,
// each with its effective policy filled in.
func (f Firmware) Pins() []KeyedPin {
	var out []KeyedPin
	keys := FirmwareKeys()
	for _, k := range slices.Sorted(maps.Keys(f.Other)) {
		keys = append(keys, "other."+k)
	}
	for _, k := range keys {
		p, _ := f.Get(k)
		if p.IsZero() {
			continue
		}
		p.Policy = f.Action(k)
		out = append(out, KeyedPin{Key: k, Pin: p})
	}
	return out
}

// EffectiveApplyTime is the pin's apply time, on-reset when it names none.
func (p Pin) EffectiveApplyTime() ApplyTime {
	if p.ApplyTime == "" {
		return ApplyOnReset
	}
	return p.ApplyTime
}
