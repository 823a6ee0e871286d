package vbmc

import "context"

// Backend turns the power actions of one System into real effects (a QEMU
// process, a lab machine's PDU outlet ...). The BMC decides what a reset
// means; the Backend only switches power.
type Backend interface {
	// PowerOn starts the machine booting from bootTarget, the Redfish
	// BootSourceOverrideTarget of a pending override ("Pxe", "Hdd", "Cd",
	// "UefiHttp" ...) or "" for the machine's normal boot order.
	PowerOn(ctx context.Context, bootTarget string) error
	// PowerOff stops the machine at once (pulling the plug).
	PowerOff(ctx context.Context) error
	// State returns the Redfish PowerState: "On" or "Off". It changes on its
	// own when the machine powers itself off.
	State() string
}

// GracefulBackend is a Backend that can also ask the guest to shut down
// (ACPI power button). GracefulShutdown and GracefulRestart use it when the
// Backend has it; Shutdown returns when the machine is off or ctx is done.
type GracefulBackend interface {
	Backend
	Shutdown(ctx context.Context) error
}

// powerOff powers a backend off, gracefully when asked and possible.
func powerOff(ctx context.Context, be Backend, graceful bool) error {
	if g, ok := be.(GracefulBackend); ok && graceful {
		return g.Shutdown(ctx)
	}
	return be.PowerOff(ctx)
}
