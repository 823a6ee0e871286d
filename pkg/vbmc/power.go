package vbmc

import (
	"fmt"
	"slices"
)

// resetTypes is every ResetType this BMC understands (Redfish Resource.ResetType
// plus Cray's "Off"), used when a mockup lists no allowable values.
var resetTypes = []string{"On", "ForceOn", "ForceOff", "Off", "GracefulShutdown", "GracefulRestart",
	"ForceRestart", "PowerCycle", "FullPowerCycle", "Nmi", "PushPowerButton"}

// transition is what a reset does to a System: power off first (gracefully
// or not), then boot (which applies pending BIOS settings and consumes a
// one-time boot override).
type transition struct {
	off, graceful, boot bool
}

// errStandby is a reset that needs the System on (Nmi while off).
type errStandby struct{ resetType string }

func (e errStandby) Error() string {
	return fmt.Sprintf("ResetType %s needs the system powered on; it is off", e.resetType)
}

// resetTransition decides what resetType does to a System whose PowerState
// is cur ("On" or "Off"), given the allowed ResetType values. It is pure.
//
//	On, ForceOn             boot when off; nothing when on
//	ForceOff, Off           off
//	GracefulShutdown        graceful off
//	PushPowerButton         graceful off when on, boot when off
//	ForceRestart, PowerCycle, FullPowerCycle  off (when on) then boot
//	GracefulRestart         graceful off (when on) then boot
//	Nmi                     nothing (409 when off)
func resetTransition(resetType, cur string, allowed []string) (transition, error) {
	if len(allowed) == 0 {
		allowed = resetTypes
	}
	if !slices.Contains(allowed, resetType) || !slices.Contains(resetTypes, resetType) {
		return transition{}, errNotInList{resetType, "ResetType", allowed}
	}
	on := cur != "Off"
	switch resetType {
	case "On", "ForceOn":
		return transition{boot: !on}, nil
	case "ForceOff", "Off":
		return transition{off: on}, nil
	case "GracefulShutdown":
		return transition{off: on, graceful: true}, nil
	case "PushPowerButton":
		if on {
			return transition{off: true, graceful: true}, nil
		}
		return transition{boot: true}, nil
	case "ForceRestart", "PowerCycle", "FullPowerCycle":
		return transition{off: on, boot: true}, nil
	case "GracefulRestart":
		return transition{off: on, graceful: true, boot: true}, nil
	case "Nmi":
		if !on {
			return transition{}, errStandby{resetType}
		}
	}
	return transition{}, nil
}

// errNotInList is a value outside a property's allowable values.
type errNotInList struct {
	value, prop string
	allowed     []string
}

func (e errNotInList) Error() string {
	return fmt.Sprintf("%s %q is not one of %v", e.prop, e.value, e.allowed)
}

func (e errNotInList) message() message { return msgValueNotInList(e.value, e.prop, e.allowed) }
