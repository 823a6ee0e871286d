// Package inventory reads a machine's hardware in-band, from the files Linux
// exposes (/sys, /proc, the SMBIOS table) and nvidia-smi where present, into
// the normalized machine.Inventory the Redfish reader fills out-of-band.
//
// Everything is read under a root directory ("/" on a machine, a fake tree in
// tests). Each part is read independently: a part that cannot be read is
// recorded in Inventory.Problems and the rest is still returned.
package inventory

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent/blockdev"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// Options configure Read.
type Options struct {
	Root string // "/" on a machine; default "/"
	// NvidiaSMI runs `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`
	// and returns its output; nil runs the binary from PATH if it is there.
	NvidiaSMI func(ctx context.Context, args ...string) ([]byte, error)
	// LLDP, if set, returns the LLDP neighbours heard on the named
	// interfaces (the NICs with link), by name (lldp.Listen); Read records
	// them in NIC.LLDP. It may wait a bounded time: Read runs it while it
	// reads the rest.
	LLDP func(ctx context.Context, ifaces []string) map[string]machine.LLDPNeighbor
	// BootIface names the interface the agent reached ingot over (see
	// BootIface); its NIC gets Boot. "" marks none.
	BootIface string
	Now       func() time.Time
}

// Read takes the inventory.
func Read(ctx context.Context, o Options) machine.Inventory {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NvidiaSMI == nil {
		o.NvidiaSMI = runNvidiaSMI
	}
	inv := machine.Inventory{Source: "agent", Taken: o.Now().UTC()}
	problem := func(part string, err error) {
		if err != nil {
			inv.Problems = append(inv.Problems, machine.Problem{Part: part, Detail: err.Error()})
		}
	}
	inv.System = readDMI(o.Root)
	var err error
	inv.CPUs, err = readCPUs(o.Root)
	problem("cpus", err)
	inv.DIMMs, err = readDIMMs(o.Root)
	problem("dimms", err)
	// The NICs first: their LLDP neighbours may take seconds to arrive,
	// heard meanwhile.
	inv.NICs, err = readNICs(o.Root)
	problem("nics", err)
	heard := listenLLDP(ctx, inv.NICs, o.LLDP)
	inv.GPUs, err = readGPUs(o.Root)
	problem("gpus", err)
	if out, err := o.NvidiaSMI(ctx, nvidiaSMIArgs...); err == nil {
		smi, err := ParseNvidiaSMI(out)
		problem("nvidia-smi", err)
		inv.GPUs = MergeNvidiaSMI(inv.GPUs, smi)
	} else if !errors.Is(err, exec.ErrNotFound) {
		problem("nvidia-smi", err)
	}
	inv.Disks, err = readDisks(o.Root)
	problem("disks", err)
	markNICs(inv.NICs, o.BootIface, <-heard)
	if inv.System.BIOSVersion != "" {
		inv.Firmware = append(inv.Firmware, machine.Firmware{Component: "BIOS", Version: inv.System.BIOSVersion})
	}
	for i, g := range inv.GPUs {
		if g.Firmware != "" {
			inv.Firmware = append(inv.Firmware, machine.Firmware{Component: "GPU" + itoa(i), Version: g.Firmware})
		}
	}
	return inv
}

func readDMI(root string) machine.System {
	dir := filepath.Join(root, "sys/class/dmi/id")
	return machine.System{
		Vendor:      readString(dir, "sys_vendor"),
		Model:       readString(dir, "product_name"),
		Serial:      readString(dir, "product_serial"),
		UUID:        strings.ToLower(readString(dir, "product_uuid")),
		BIOSVersion: readString(dir, "bios_version"),
		PowerState:  "On",
	}
}

func readDisks(root string) ([]machine.Disk, error) {
	ds, err := blockdev.List(root)
	if err != nil {
		return nil, err
	}
	out := make([]machine.Disk, 0, len(ds))
	for _, d := range ds {
		out = append(out, DiskOf(d))
	}
	return out, nil
}

// DiskOf converts a sysfs disk to the normalized model. Health is "OK" when
// the device state is live/running (or not reported), else the state: the
// agent has no SMART reader in the initramfs.
func DiskOf(d blockdev.Disk) machine.Disk {
	health := "OK"
	switch d.State {
	case "", "live", "running":
	default:
		health = d.State
	}
	media := map[string]string{"nvme": "NVMe", "hdd": "HDD", "ssd": "SSD"}[d.Media()]
	return machine.Disk{Name: d.Path, Model: d.Model, Serial: d.Serial, SizeBytes: d.Size, Media: media, Health: health}
}

func readString(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func runNvidiaSMI(ctx context.Context, args ...string) ([]byte, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, path, args...).Output()
}
