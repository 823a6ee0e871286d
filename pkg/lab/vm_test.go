package lab

import (
	"slices"
	"strings"
	"testing"
)

// A uefi-http VM boots through OVMF's own HTTP boot: its NIC has no option
// ROM (which would be iPXE), OVMF's PXE is off (OVMF would try it first),
// and a network boot override puts the NIC first. A uefi-pxe VM keeps PXE.
func TestQEMUArgsFirmwareHTTP(t *testing.T) {
	pxeOff := []string{"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no"}
	for name, c := range map[string]struct {
		vm       VM
		noROM    bool
		pxeIsOff bool
	}{
		"uefi-http": {VM{Firmware: "uefi", FirmwareHTTP: true}, true, true},
		"arm64":     {VM{Firmware: "uefi", Arch: ArchARM64, FirmwareHTTP: true}, true, true},
		"uefi-pxe":  {VM{Firmware: "uefi", FirmwarePXE: true}, true, false},
		"uefi":      {VM{Firmware: "uefi"}, false, false},
		"bios":      {VM{Firmware: "bios"}, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			c.vm.MAC, c.vm.Tap, c.vm.Disk, c.vm.Console, c.vm.Vars, c.vm.MemMiB = "52:54:00:77:00:10", "tap0", "d.raw", "c.log", "v.fd", 1024
			args, boot := c.vm.qemuArgs("tcg")
			if got := hasSeq(args, pxeOff); got != c.pxeIsOff {
				t.Errorf("IPv4 PXE turned off: %v, want %v\n%q", got, c.pxeIsOff, args)
			}
			for _, target := range []string{"Pxe", "UefiHttp"} {
				nic := boot[target][1]
				if !strings.HasPrefix(nic, "virtio-net-pci,") || !strings.HasSuffix(nic, ",bootindex=1") {
					t.Errorf("%s: the NIC is not booted first: %q", target, boot[target])
				}
				if got := strings.Contains(nic, ",romfile=,") || strings.HasSuffix(nic, ",romfile="); got != c.noROM {
					t.Errorf("%s: NIC without option ROM: %v, want %v (%q)", target, got, c.noROM, nic)
				}
			}
			if !strings.HasSuffix(boot["Hdd"][3], ",bootindex=1") {
				t.Errorf("Hdd: the disk is not booted first: %q", boot["Hdd"])
			}
		})
	}
}

func hasSeq(args, seq []string) bool {
	for i := range args {
		if slices.Equal(args[i:min(len(args), i+len(seq))], seq) {
			return true
		}
	}
	return false
}

// A simulated POST makes every firmware start wait (the boot menu's
// timeout); without one the firmware does not wait.
func TestQEMUArgsSimulatedPOST(t *testing.T) {
	for _, fw := range []string{"bios", "uefi"} {
		vm := VM{Firmware: fw, MAC: "52:54:00:77:00:10", Tap: "tap0", Disk: "d.raw", Console: "c.log", Vars: "v.fd", MemMiB: 1024, POSTMillis: 30000}
		args, _ := vm.qemuArgs("tcg")
		if !hasSeq(args, []string{"-boot", "menu=on,splash-time=30000"}) {
			t.Errorf("%s with a 30 s POST: %q", fw, args)
		}
		vm.POSTMillis = 0
		if args, _ := vm.qemuArgs("tcg"); slices.Contains(args, "-boot") {
			t.Errorf("%s without a POST waits: %q", fw, args)
		}
	}
}

// An arm64 VM is a QEMU virt machine under AAVMF, run by
// qemu-system-aarch64 with TCG even where the lab's x86-64 VMs get KVM.
func TestQEMUArgsARM64(t *testing.T) {
	vm := VM{Name: "lab1-arm64", Firmware: "uefi", Arch: ArchARM64, FirmwareHTTP: true, MAC: "52:54:00:77:00:10",
		Tap: "tap0", Disk: "d.raw", Console: "c.log", Vars: "vars.fd", MemMiB: 1024}
	args, _ := vm.qemuArgs("kvm")
	for _, seq := range [][]string{
		{"-accel", "tcg"},
		{"-machine", "virt", "-cpu", "cortex-a57"},
		{"-drive", "if=pflash,format=raw,readonly=on,file=" + aavmfCode, "-drive", "if=pflash,format=raw,file=vars.fd"},
		{"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no"},
	} {
		if !hasSeq(args, seq) {
			t.Errorf("no %q in %q", seq, args)
		}
	}
	if slices.Contains(args, "q35") || slices.Contains(args, "pc") {
		t.Errorf("an x86 machine type: %q", args)
	}
	if vm.Binary() != "qemu-system-aarch64" || (&VM{Firmware: "uefi"}).Binary() != "qemu-system-x86_64" {
		t.Errorf("binaries %s, %s", vm.Binary(), (&VM{}).Binary())
	}
	x86 := VM{Firmware: "uefi", MAC: vm.MAC, Tap: "tap0", Disk: "d.raw", Console: "c.log", Vars: "v.fd", MemMiB: 1024}
	if args, _ := x86.qemuArgs("kvm"); !hasSeq(args, []string{"-accel", "kvm"}) {
		t.Errorf("an x86-64 VM does not get the lab's accelerator: %q", args)
	}
}
