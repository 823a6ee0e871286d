package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// VM is one lab machine: a QEMU VM on the lab bridge, powered by its own
// virtual BMC.
type VM struct {
	Name     string `json:"name"`
	Firmware string `json:"firmware"` // bios (SeaBIOS) or uefi (OVMF; AAVMF for arm64)
	// Arch is "" (x86-64: qemu-system-x86_64) or "arm64": a QEMU virt
	// machine (qemu-system-aarch64, always TCG) under AAVMF, booting its
	// agent through the firmware's HTTP boot.
	Arch string `json:"arch,omitempty"`
	MAC  string `json:"mac"`
	Tap  string `json:"tap"`
	Disk string `json:"disk"`
	// DataDisks are the VM's other disks (the recipe's non-boot disk
	// rules), never booted from.
	DataDisks []string `json:"data_disks,omitempty"`
	Console   string   `json:"console"` // serial console log
	BMCPort   int      `json:"bmc_port"`
	MemMiB    int      `json:"mem_mib"`
	// FirmwarePXE makes a UEFI VM boot through OVMF's own PXE (no NIC
	// option ROM), so the TFTP stage (firmware -> snponly.efi -> iPXE) runs.
	FirmwarePXE bool `json:"firmware_pxe"`
	// FirmwareHTTP makes a UEFI VM boot through OVMF's own HTTP boot: no
	// NIC option ROM, OVMF's PXE turned off, so the firmware fetches the
	// agent UKI over HTTP itself (no TFTP, no iPXE).
	FirmwareHTTP bool   `json:"firmware_http,omitempty"`
	Vars         string `json:"vars,omitempty"` // per-VM OVMF (AAVMF) variable store
	// POSTMillis makes the firmware wait this long at every start (its
	// boot menu's timeout), as a server's POST does; 0: none.
	POSTMillis int `json:"post_ms,omitempty"`
}

// OVMF firmware files of Debian's ovmf package, and AAVMF's (the arm64
// build of the same EDK2) of qemu-efi-aarch64.
const (
	ovmfCode  = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars  = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	aavmfCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	aavmfVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
)

// ArchARM64 is VM.Arch of an arm64 VM.
const ArchARM64 = "arm64"

// Binary is the QEMU program that runs the VM.
func (v *VM) Binary() string {
	if v.Arch == ArchARM64 {
		return "qemu-system-aarch64"
	}
	return "qemu-system-x86_64"
}

// qemuArgs returns the VM's QEMU arguments without boot devices, and the
// device arguments for each Redfish boot target: the override decides which
// device gets bootindex=1 (OVMF ignores -boot order).
// accel is the accelerator the VM runs under, given the lab's: an x86-64
// host's KVM cannot run an arm64 guest, so arm64 VMs always run TCG.
func (v *VM) accel(lab string) string {
	if v.Arch == ArchARM64 {
		return "tcg"
	}
	return lab
}

func (v *VM) qemuArgs(accel string) ([]string, map[string][]string) {
	args := []string{
		"-name", v.Name, "-accel", v.accel(accel), "-smp", "1", "-m", fmt.Sprint(v.MemMiB),
		// The console log is appended to, so it keeps every boot of the VM.
		"-nographic", "-chardev", "file,id=con0,append=on,path=" + v.Console, "-serial", "chardev:con0",
		"-monitor", "none", "-no-reboot",
		"-netdev", "tap,id=n0,ifname=" + v.Tap + ",script=no,downscript=no",
		"-drive", "if=none,id=d0,format=raw,file=" + v.Disk,
		// An entropy source: without one the guest's pool stays empty for
		// minutes under TCG.
		"-device", "virtio-rng-pci",
	}
	if v.Arch == ArchARM64 {
		// cortex-a57 (ARMv8.0): TCG emulates it faster than -cpu max,
		// whose pointer authentication costs much under TCG; Debian's
		// arm64 kernel needs no more. The PL011 on virt is the -serial.
		args = append(args, "-machine", "virt", "-cpu", "cortex-a57",
			"-drive", "if=pflash,format=raw,readonly=on,file="+aavmfCode,
			"-drive", "if=pflash,format=raw,file="+v.Vars)
	} else if v.Firmware == "uefi" {
		args = append(args, "-machine", "q35",
			"-drive", "if=pflash,format=raw,readonly=on,file="+ovmfCode,
			"-drive", "if=pflash,format=raw,file="+v.Vars)
	} else {
		args = append(args, "-machine", "pc")
	}
	nic := "virtio-net-pci,netdev=n0,mac=" + v.MAC
	if v.FirmwarePXE || v.FirmwareHTTP {
		nic += ",romfile="
	}
	if v.FirmwareHTTP {
		// OVMF tries a NIC's PXE boot options before its HTTP ones, and
		// the DHCP server answers both: without these the firmware would
		// PXE-boot over TFTP. fw_cfg knobs read at start (OvmfPkg's
		// RUNTIME_CONFIG.md; edk2 since 2020; ArmVirtQemu, AAVMF, links
		// the same PxeBcPcdProducerLib). HTTP boot stays on.
		args = append(args, "-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no")
	}
	if v.POSTMillis > 0 {
		// A simulated POST: SeaBIOS and OVMF both wait out the boot menu's
		// timeout (fw_cfg etc/boot-menu-wait) at every firmware start; a
		// kexec skips it, as it skips a real server's POST.
		args = append(args, "-boot", fmt.Sprintf("menu=on,splash-time=%d", v.POSTMillis))
	}
	disk := "virtio-blk-pci,drive=d0"
	// Data disks come after the boot disk, so the guest names the boot
	// disk vda (PCI slots follow the order of -device).
	var data []string
	for i, d := range v.DataDisks {
		data = append(data, "-drive", fmt.Sprintf("if=none,id=data%d,format=raw,file=%s", i, d),
			"-device", fmt.Sprintf("virtio-blk-pci,drive=data%d,serial=ingot-data%d", i, i))
	}
	net1 := append([]string{"-device", nic + ",bootindex=1", "-device", disk + ",bootindex=2"}, data...)
	disk1 := append([]string{"-device", nic + ",bootindex=2", "-device", disk + ",bootindex=1"}, data...)
	return args, map[string][]string{"Pxe": net1, "UefiHttp": net1, "Hdd": disk1, "": disk1, "None": disk1}
}

// prepare creates the VM's boot disk (sparse, zeroed), its data disks
// (dataBytes[i] for DataDisks[i], filled with a pattern so a test can tell
// that a read-only burn-in left them alone) and OVMF variable store.
func (v *VM) prepare(diskBytes int64, dataBytes []int64) error {
	if err := os.MkdirAll(filepath.Dir(v.Disk), 0o755); err != nil {
		return err
	}
	if err := makeDisk(v.Disk, diskBytes, false); err != nil {
		return fmt.Errorf("creating the disk of %s: %w", v.Name, err)
	}
	for i, d := range v.DataDisks {
		if err := makeDisk(d, dataBytes[i], true); err != nil {
			return fmt.Errorf("creating data disk %d of %s: %w", i+1, v.Name, err)
		}
	}
	if v.Firmware == "uefi" {
		vars, pkg := ovmfVars, "ovmf"
		if v.Arch == ArchARM64 {
			vars, pkg = aavmfVars, "qemu-efi-aarch64"
		}
		b, err := os.ReadFile(vars)
		if err != nil {
			return fmt.Errorf("UEFI variable store (package %s): %w", pkg, err)
		}
		if err := durable.WriteFile(v.Vars, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// makeDisk creates a disk file of size bytes: sparse zeroes, or a
// repeating pattern naming each MiB.
func makeDisk(path string, size int64, pattern bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if pattern {
		mib := make([]byte, 1<<20)
		for off := int64(0); off < size && err == nil; off += int64(len(mib)) {
			copy(mib, fmt.Sprintf("ingot lab data disk, MiB %d\n", off>>20))
			_, err = f.Write(mib[:min(int64(len(mib)), size-off)])
		}
	} else {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Accel picks QEMU's accelerator: KVM only where it really works. A
// /dev/kvm without hardware virtualization in the CPU flags (nested or
// para-virtualized hosts, as measured on the CI machines) makes OVMF and
// SeaBIOS fail, so both must be present; INGOT_LAB_ACCEL overrides.
func Accel(getenv func(string) string) string {
	if a := getenv("INGOT_LAB_ACCEL"); a != "" {
		return a
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return "tcg"
	}
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "tcg"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "flags") {
			f := " " + line + " "
			if strings.Contains(f, " vmx ") || strings.Contains(f, " svm ") {
				return "kvm"
			}
			return "tcg"
		}
	}
	return "tcg"
}
