// Package firmware brings a node's firmware to its recipe's pins over
// Redfish: Plan (pure) says, per component instance, what runs, what is
// pinned and what to do; Apply (the per-node procedure) flashes one
// package through a narrow BMC interface, persisting a Step after every
// move so a restarted ingot resumes without flashing twice; Gate (pure)
// holds the campaign's limits (one update per BMC, per rack, in total, a
// pause between starts, maintenance windows) and Run drives nodes under
// it. The engine's firmware job is a thin loop over these.
package firmware

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware/version"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Action is what a plan does about one component instance.
type Action string

// The actions.
const (
	ActionNone              Action = "none"                   // at the pin
	ActionUpdate            Action = "update"                 // below the pin: its package brings it
	ActionDowngrade         Action = "downgrade"              // above the pin, and the pin allows a downgrade
	ActionBlockedDowngrade  Action = "blocked-downgrade"      // above the pin; a downgrade is refused without allow_downgrade
	ActionBlockedUnordered  Action = "blocked-unordered"      // the versions cannot be ordered (another family, unknown); allow_downgrade lets it through
	ActionBlockedNotUpdated Action = "blocked-not-updateable" // the BMC marks the component Updateable false
	ActionBlockedNoTarget   Action = "blocked-no-target"      // only the in-band inventory knows it: Redfish can neither flash nor verify it
	ActionBlock             Action = "block"                  // off its pin, policy block: the node is not ready, nothing is flashed
	ActionWarn              Action = "warn"                   // off its pin (or not reported), policy warn
	ActionMissing           Action = "missing"                // pinned, but the hardware reports no such component
	ActionUnpinned          Action = "unpinned"               // no pin holds it
)

// Flashes reports whether the action flashes firmware.
func (a Action) Flashes() bool { return a == ActionUpdate || a == ActionDowngrade }

// Blocks reports whether the action keeps the node from ready.
func (a Action) Blocks() bool {
	switch a {
	case ActionNone, ActionWarn, ActionUnpinned:
		return false
	}
	return true
}

// Classes of component: the recipe's fixed pin keys, or other.
const (
	ClassBIOS  = "bios"
	ClassBMC   = "bmc"
	ClassGPU   = "gpu"
	ClassNIC   = "nic"
	ClassOther = "other"
)

// Instance is one firmware component instance of a node: a
// FirmwareInventory entry, or one the in-band inventory knows and the BMC
// does not list.
type Instance struct {
	Component  string `json:"component"`        // normalised name ("NVIDIA A40 (PCI-E Slot 1)", "GPU SXM1")
	Class      string `json:"class"`            // bios, bmc, gpu, nic, other
	Model      string `json:"model,omitempty"`  // the inventory's model where known ("NVIDIA A40", "ConnectX-7")
	Target     string `json:"target,omitempty"` // FirmwareInventory URI ("" for in-band only)
	Source     string `json:"source"`           // redfish or inband
	Version    string `json:"found"`            // the version running now ("" when none is reported)
	Updateable bool   `json:"updateable"`
	names      []string
}

// Entry is one line of a plan.
type Entry struct {
	Instance
	Key       string `json:"pin,omitempty"` // the pin that holds it: bios, bmc, gpu, nic, other.NAME
	Pinned    string `json:"pinned,omitempty"`
	Action    Action `json:"action"`
	Package   string `json:"package,omitempty"`    // the sha256 that brings it
	ApplyTime string `json:"apply_time,omitempty"` // immediate, on-reset, ac-cycle
	Reason    string `json:"reason,omitempty"`
}

// Plan is a node's firmware against its pins.
type Plan struct {
	Entries  []Entry   `json:"entries"`
	Packages []Package `json:"packages,omitempty"`
}

// Package is one package applied to the node: every entry it brings (an
// HGX bundle brings every GPU and NVSwitch at once), in one update.
type Package struct {
	SHA256    string            `json:"sha256"`
	ApplyTime string            `json:"apply_time"`
	Targets   []string          `json:"targets"`
	Want      map[string]string `json:"want"`    // target -> pinned version
	Entries   []int             `json:"entries"` // indexes into Plan.Entries
}

// Blocked reports whether any entry keeps the node from ready.
func (p Plan) Blocked() bool {
	return slices.ContainsFunc(p.Entries, func(e Entry) bool { return e.Action.Blocks() && !e.Action.Flashes() })
}

// MakePlan plans one node: the BMC's firmware inventory (items), the
// in-band or BMC inventory for components the BMC does not list (inv; the
// zero value when there is none), and the recipe's pins. It is pure.
func MakePlan(items []bmc.FirmwareItem, inv machine.Inventory, fw recipe.Firmware) Plan {
	insts := Instances(items, inv)
	pins := orderPins(fw.Pins())
	var p Plan
	used := make([]bool, len(pins))
	for _, in := range insts {
		e := Entry{Instance: in, Action: ActionUnpinned}
		for i, kp := range pins {
			if holds(kp, in) {
				used[i] = true
				decide(&e, kp)
				break
			}
		}
		p.Entries = append(p.Entries, e)
	}
	for i, kp := range pins {
		if !used[i] {
			e := Entry{Instance: Instance{Component: cmp.Or(kp.Component, strings.TrimPrefix(kp.Key, "other.")), Class: classOfKey(kp.Key)}, Key: kp.Key,
				Pinned: kp.Version, Action: ActionMissing, Reason: "the hardware reports no such component"}
			if kp.Policy == recipe.FirmwareWarn {
				e.Action = ActionWarn
			}
			p.Entries = append(p.Entries, e)
		}
	}
	p.Packages = packages(p.Entries)
	return p
}

// orderPins puts the specific pins first: a pin naming its component,
// then other.NAME, then the bare class pins. An instance takes the first
// pin that holds it.
func orderPins(pins []recipe.KeyedPin) []recipe.KeyedPin {
	rank := func(p recipe.KeyedPin) int {
		switch {
		case p.Component != "":
			return 0
		case strings.HasPrefix(p.Key, "other."):
			return 1
		}
		return 2
	}
	out := slices.Clone(pins)
	slices.SortStableFunc(out, func(a, b recipe.KeyedPin) int { return rank(a) - rank(b) })
	return out
}

func classOfKey(key string) string {
	if slices.Contains(recipe.FirmwareKeys(), key) {
		return key
	}
	return ClassOther
}

// holds reports whether a pin holds an instance: a class pin holds its
// class, other.NAME the instances whose name says NAME; a component, where
// the pin names one, must match the instance's name or model.
func holds(kp recipe.KeyedPin, in Instance) bool {
	class := classOfKey(kp.Key)
	if class != ClassOther && in.Class != class {
		return false
	}
	want := kp.Component
	if want == "" && class == ClassOther {
		want = strings.TrimPrefix(kp.Key, "other.")
	}
	if want == "" {
		return true
	}
	n := norm(want)
	return slices.ContainsFunc(in.names, func(s string) bool { return n != "" && strings.Contains(norm(s), n) })
}

// decide fills an entry's pin and action.
func decide(e *Entry, kp recipe.KeyedPin) {
	e.Key, e.Pinned, e.Package, e.ApplyTime = kp.Key, kp.Version, kp.Package, string(kp.EffectiveApplyTime())
	switch {
	case !version.Parse(e.Version).Known() && !version.Equal(e.Version, kp.Version):
		e.Action, e.Reason = ActionMissing, "no version reported"
		if kp.Policy == recipe.FirmwareWarn {
			e.Action = ActionWarn
		}
	case version.Equal(e.Version, kp.Version):
		e.Action = ActionNone
	case kp.Policy == recipe.FirmwareWarn:
		e.Action = ActionWarn
	case kp.Policy == recipe.FirmwareBlock:
		e.Action, e.Reason = ActionBlock, "policy block: update it with another tool, or pin with policy update and a package"
	default:
		decideUpdate(e, kp)
	}
	if !e.Action.Flashes() {
		e.Package, e.ApplyTime = "", ""
	}
}

func decideUpdate(e *Entry, kp recipe.KeyedPin) {
	c, ordered := version.Compare(e.Version, kp.Version)
	switch {
	case e.Target == "":
		e.Action, e.Reason = ActionBlockedNoTarget, "the BMC does not list this component: Redfish can neither flash nor verify it"
	case !e.Updateable:
		e.Action, e.Reason = ActionBlockedNotUpdated, "the BMC marks it Updateable: false"
	case !ordered && kp.AllowDowngrade:
		e.Action, e.Reason = ActionUpdate, "the versions cannot be ordered; allow_downgrade lets the update through"
	case !ordered:
		e.Action, e.Reason = ActionBlockedUnordered, fmt.Sprintf("%q and %q cannot be ordered (another family or format): set allow_downgrade to flash anyway", e.Version, kp.Version)
	case c < 0:
		e.Action = ActionUpdate
	case kp.AllowDowngrade:
		e.Action, e.Reason = ActionDowngrade, "allow_downgrade"
	default:
		e.Action, e.Reason = ActionBlockedDowngrade, fmt.Sprintf("%s runs a newer version than the pin %s: set allow_downgrade to go back", e.Version, kp.Version)
	}
}

// packages groups the flashing entries by package.
func packages(entries []Entry) []Package {
	var out []Package
	for i, e := range entries {
		if !e.Action.Flashes() {
			continue
		}
		j := slices.IndexFunc(out, func(p Package) bool { return p.SHA256 == e.Package })
		if j < 0 {
			out = append(out, Package{SHA256: e.Package, ApplyTime: e.ApplyTime, Want: map[string]string{}})
			j = len(out) - 1
		}
		p := &out[j]
		p.Entries = append(p.Entries, i)
		if !slices.Contains(p.Targets, e.Target) {
			p.Targets = append(p.Targets, e.Target)
		}
		p.Want[e.Target] = e.Pinned
		p.ApplyTime = strongerApply(p.ApplyTime, e.ApplyTime)
	}
	order := func(p Package) int {
		return slices.Index([]string{ClassBMC, ClassBIOS, ClassGPU, ClassNIC, ClassOther}, entries[p.Entries[0]].Class)
	}
	slices.SortStableFunc(out, func(a, b Package) int { return order(a) - order(b) })
	return out
}

// strongerApply is the apply time that covers both: ac-cycle > on-reset >
// immediate.
func strongerApply(a, b string) string {
	rank := map[string]int{string(recipe.ApplyImmediate): 0, string(recipe.ApplyOnReset): 1, string(recipe.ApplyACCycle): 2}
	if rank[b] > rank[a] || a == "" {
		return b
	}
	return a
}

// norm lowercases s and keeps letters and digits: "HGX_Baseboard" and
// "hgx-baseboard" are "hgxbaseboard".
func norm(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}
