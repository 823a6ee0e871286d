package pid1

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Reboot syncs and restarts the machine. It returns only on failure.
func Reboot() error {
	unix.Sync()
	return fmt.Errorf("reboot: %w", unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART))
}

// Poweroff syncs and powers the machine off (ACPI). It returns only on failure.
func Poweroff() error {
	unix.Sync()
	return fmt.Errorf("poweroff: %w", unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF))
}

// Kexec loads kernel and initrd (initrd may be "") with cmdline through
// kexec_file_load and jumps into it. It returns only on failure; the caller
// then reboots. Secure Boot kernels need a signed kernel here (the kernel
// checks the signature of a file-loaded image in lockdown).
func Kexec(kernel, initrd, cmdline string) error {
	k, err := os.Open(kernel)
	if err != nil {
		return fmt.Errorf("kexec: %w", err)
	}
	defer k.Close()
	ifd, flags := -1, uintptr(unix.KEXEC_FILE_NO_INITRAMFS)
	if initrd != "" {
		i, err := os.Open(initrd)
		if err != nil {
			return fmt.Errorf("kexec: %w", err)
		}
		defer i.Close()
		ifd, flags = int(i.Fd()), 0
	}
	if err := unix.KexecFileLoad(int(k.Fd()), ifd, cmdline, int(flags)); err != nil {
		return fmt.Errorf("kexec_file_load %s (initrd %q): %w", kernel, initrd, err)
	}
	unix.Sync()
	return fmt.Errorf("kexec reboot: %w", unix.Reboot(unix.LINUX_REBOOT_CMD_KEXEC))
}
