// Command ingot-agent is ingot's imaging agent. It runs as PID 1 of the
// initramfs ingot network-boots (static, CGO_ENABLED=0): it mounts /proc /sys
// /dev /run /tmp, loads the kernel modules listed in /etc/ingot/modules,
// brings up the first NIC with carrier by DHCP, reads ingot.server,
// ingot.token and ingot.machine from /proc/cmdline, runs the task the server
// gives it (inventory, image write, acceptance checks) and hands off
// (reboot, kexec or poweroff). As PID 1 it never returns: after a fatal
// error it reports, prints the reason and waits, powers off or reboots as
// ingot.onerror says.
//
// It also runs as an ordinary process for tests, with flags overriding the
// command line; then it neither brings up the network nor reboots unless
// asked (--net, --handoff=perform):
//
//	ingot-agent --server http://127.0.0.1:8080 --token T --disk /tmp/disk.img
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if os.Getpid() == 1 {
		// PID 1 must never exit (the kernel would panic): run only returns
		// here on a path it did not expect.
		fmt.Fprintf(os.Stdout, "ingot-agent: fatal: PID 1 would exit with code %d; waiting\n", code)
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(code)
}

// options are the flags; each overrides the kernel command line's key.
type options struct {
	cmdline string // file to read the kernel command line from
	server  string
	token   string
	machine string
	root    string // where /sys and /proc are read for inventory and disks
	disk    string
	iface   string
	onError string
	net     bool
	handoff string // "perform" or "print"
	modules string
	debug   bool
	pid1    bool
	// installRoot, when set, is the installed system's root folder to write
	// the first-boot settings into (tests, or a disk mounted by hand);
	// empty: the agent mounts the written disk's root partition.
	installRoot string
}

func parseFlags(args []string, stderr io.Writer, pid1 bool) (options, error) {
	o := options{pid1: pid1}
	fs := flag.NewFlagSet("ingot-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.cmdline, "cmdline", "/proc/cmdline", "file holding the kernel command line")
	fs.StringVar(&o.server, "server", "", "ingot server URL (overrides ingot.server)")
	fs.StringVar(&o.token, "token", "", "the machine's one-time token (overrides ingot.token)")
	fs.StringVar(&o.machine, "machine", "", "machine id (overrides ingot.machine)")
	fs.StringVar(&o.root, "root", "/", "root of the /sys and /proc trees read for inventory and disks")
	fs.StringVar(&o.disk, "disk", "", "write the image here, a block device or a file (overrides ingot.disk and the recipe's selector)")
	fs.StringVar(&o.iface, "iface", "", "DHCP on this interface (overrides ingot.iface)")
	fs.StringVar(&o.onError, "onerror", "", "after a fatal error as PID 1: wait, poweroff or reboot (overrides ingot.onerror)")
	fs.BoolVar(&o.net, "net", pid1, "bring up the network with DHCP (default: only as PID 1)")
	def := "print"
	if pid1 {
		def = "perform"
	}
	fs.StringVar(&o.handoff, "handoff", def, "perform the handoff (reboot/kexec/poweroff) or only print it")
	fs.StringVar(&o.modules, "modules", "/etc/ingot/modules", "kernel modules to load, one path per line (PID 1 only)")
	fs.BoolVar(&o.debug, "debug", false, "verbose logs (or ingot.debug)")
	fs.StringVar(&o.installRoot, "install-root", "", "write the first-boot settings under this folder instead of the written disk's root partition")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *showVersion {
		fmt.Fprintln(stderr, "ingot-agent", version)
		return o, flag.ErrHelp
	}
	if o.handoff != "perform" && o.handoff != "print" {
		return o, fmt.Errorf("--handoff=%q: expected perform or print", o.handoff)
	}
	return o, nil
}
