package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/lab"
)

const labUsage = `Usage: ingot lab up|down|status|dashboard [flags]

  up      build the agent and the lab image, create a network namespace with a
          bridge, start ingot serve and a virtual BMC per QEMU VM in it, enroll
          the VMs with the lab-qemu recipe and provision them to ready over the
          network (BMC power-on -> DHCP -> iPXE -> agent -> image -> first boot);
          then reimage one three ways (kexec, reboot, warm) and print the times
          (an arm64 VM first: reboot only, its Debian kernel cannot kexec).
  down    stop everything the lab started and remove its namespace.
  status  the lab's machines and their states.
  dashboard  forward https://127.0.0.1:8443 on this host to the lab's
          dashboard in its namespace (until interrupted).

Every address the lab uses lives inside its own namespace; the host's
network is never touched. Needs root, QEMU (TCG unless KVM really works).
`

func runLab(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, labUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	sub := map[string]func(context.Context, *env, []string) error{
		"up": runLabUp, "down": runLabDown, "status": runLabStatus, "bmc": runLabBMC, "dashboard": runLabDashboard,
	}[args[0]]
	if sub == nil {
		fmt.Fprintf(e.stderr, "ingot lab: unknown command %q\n\n%s", args[0], labUsage)
		return errUsage
	}
	return sub(ctx, e, args[1:])
}

func runLabUp(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("lab up", "lab up [--dir DIR] [--vms bios,uefi,uefi-pxe,uefi-http,arm64] [--recipe lab-qemu] [--site-dhcp dnsmasq] [--store bolt|etcd|etcd://...] [--simulate-post 30s] [--reimage=true]")
	dir := fs.String("dir", "/var/lib/ingot-lab", "where the lab keeps disks, logs and its database")
	post := fs.Duration("simulate-post", 0, "make every firmware start of a VM wait this long, as a server's POST does (e.g. 30s), to compare kexec, reboot and warm reimages")
	siteDHCP := fs.String("site-dhcp", "", "run a real dnsmasq as the site's DHCP server on the lab network and ingot in proxy mode beside it (default: ingot's own DHCP, full mode)")
	store := fs.String("store", "", "where ingot serve keeps its records: bolt (default: the embedded file in DIR/data), etcd (the lab runs a one-member etcd inside its namespace, Debian's etcd-server), or an etcd:// URL reachable from inside the lab's namespace")
	vms := fs.String("vms", "bios", "comma-separated firmware of each VM: bios (SeaBIOS) or uefi (OVMF); uefi-pxe = OVMF's own PXE without a NIC ROM; uefi-http = OVMF's own HTTP boot of the agent UKI (PXE off, no TFTP, no iPXE); arm64 = an arm64 QEMU virt VM (TCG) whose AAVMF HTTP-boots its arm64 agent UKI, enrolled with --recipe-arm64")
	recipeName := fs.String("recipe", "lab-qemu", "the recipe the VMs are enrolled with; its os.image.name picks the image (a folder of images/) and its non-boot disk rules the VMs' data disks (lab-burnin: real stress-ng, fio and iperf3 burn-in, boot two VMs)")
	reimage := fs.Bool("reimage", true, "after provisioning, reimage the first VM three ways (kexec hand-off, reboot hand-off, warm) and print the times to restore")
	repo := fs.String("repo", ".", "the ingot source tree (recipes/, images/)")
	agent := fs.String("agent", "", "ingot-agent binary (default: next to this binary)")
	agentARM64 := fs.String("agent-arm64", "", "ingot-agent built for arm64, for arm64 VMs (default: ingot-agent-arm64 next to this binary; make build-arm64)")
	recipeARM64 := fs.String("recipe-arm64", "lab-qemu-arm64", "the recipe arm64 VMs are enrolled with (its agent and image are arm64)")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up after this long")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if *agent == "" {
		*agent = filepath.Join(filepath.Dir(self), "ingot-agent")
	}
	if _, err := os.Stat(*agent); err != nil {
		return fmt.Errorf("ingot-agent binary: %w (build it with 'make build' or pass --agent)", err)
	}
	var specs []lab.VMSpec
	for _, v := range strings.Split(*vms, ",") {
		switch v {
		case "bios", "uefi":
			specs = append(specs, lab.VMSpec{Firmware: v})
		case "uefi-pxe":
			specs = append(specs, lab.VMSpec{Firmware: "uefi", FirmwarePXE: true})
		case "uefi-http":
			specs = append(specs, lab.VMSpec{Firmware: "uefi", FirmwareHTTP: true})
		case "arm64":
			specs = append(specs, lab.ARM64())
			if *agentARM64 == "" {
				*agentARM64 = filepath.Join(filepath.Dir(self), "ingot-agent-arm64")
			}
			if _, err := os.Stat(*agentARM64); err != nil {
				return fmt.Errorf("ingot-agent for arm64: %w (build it with 'make build-arm64' or pass --agent-arm64)", err)
			}
		default:
			return fmt.Errorf("--vms: %q is not bios, uefi, uefi-pxe, uefi-http or arm64", v)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	l, err := lab.Up(ctx, lab.Config{Dir: *dir, Binary: self, AgentBinary: *agent, AgentBinaryARM64: *agentARM64, RepoRoot: *repo, VMs: specs, SiteDHCP: *siteDHCP, Store: *store, POST: *post,
		Recipe: *recipeName, RecipeARM64: *recipeARM64, DiskBytes: 1 << 30, Out: e.stdout, Getenv: e.getenv})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "lab: namespace %s, ingot boot files at %s, API at %s (accel %s)\n", l.State.Namespace, l.State.ServerURL, l.State.APIURL, l.State.Accel)
	res, err := l.Reimage(ctx)
	if err != nil {
		return err
	}
	if !printResults(e, res) {
		return exitError(1)
	}
	if *reimage {
		if err := compareReimages(ctx, e, l); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "\nThe lab stays up. Consoles: %s/vms/*/console.log\n", *dir)
	fmt.Fprintf(e.stdout, "  ip netns exec %s %s reimage %s --server %s --ca %s --token %s\n", l.State.Namespace, self, l.State.VMs[0].Name, l.State.APIURL, l.State.CA, l.State.Token)
	fmt.Fprintf(e.stdout, "  %s lab down --dir %s\n", self, *dir)
	printDashboard(e, l, self, *dir)
	return nil
}

// compareReimages reimages the lab's first VM three ways, side by side:
// through the BMC with the recipe's kexec hand-off (one POST), with a
// reboot hand-off (two), and warm (the installed OS kexecs into the agent:
// none), and prints the times to restore.
func compareReimages(ctx context.Context, e *env, l *lab.Lab) error {
	vm := l.State.VMs[0].Name
	took := map[string]time.Duration{}
	ways := []string{"kexec", "reboot", "warm"}
	if l.State.VMs[0].Arch == lab.ArchARM64 {
		// Debian's arm64 kernel has no kexec_file_load, which the agent's
		// kexec and warm reimage use: the reboot hand-off only.
		ways = []string{"reboot"}
	}
	for _, way := range ways {
		fmt.Fprintf(e.stdout, "lab: reimaging %s from its recipe (%s)\n", vm, way)
		var res []lab.Result
		var err error
		if way == "warm" {
			res, err = l.ReimageWarm(ctx, vm)
		} else {
			res, err = l.ReimageHandoff(ctx, way, vm)
		}
		if err != nil {
			return err
		}
		if !printResults(e, res) {
			return exitError(1)
		}
		took[way] = res[0].Status.Restore()
	}
	if len(ways) == 3 {
		ref := max(took["reboot"].Seconds(), 1)
		fmt.Fprintf(e.stdout, "lab: time to restore %s: reboot %s (1.00), kexec %s (%.2f), warm %s (%.2f); on a GPU server each POST avoided is 5-15 minutes\n",
			vm, took["reboot"].Round(time.Second), took["kexec"].Round(time.Second), took["kexec"].Seconds()/ref,
			took["warm"].Round(time.Second), took["warm"].Seconds()/ref)
	}
	return nil
}

// printDashboard says where the dashboard is and how to reach it from the
// host (the namespace is not routed from it) and from a workstation.
func printDashboard(e *env, l *lab.Lab, self, dir string) {
	fmt.Fprintf(e.stdout, "\nDashboard: %s inside the namespace. From this host:\n", l.DashboardURL())
	fmt.Fprintf(e.stdout, "  %s lab dashboard --dir %s    # forwards https://127.0.0.1:8443/ui/ to it; trust %s, log in with the token above\n",
		self, dir, l.State.CA)
	fmt.Fprintf(e.stdout, "  from a workstation: ssh -L 8443:127.0.0.1:8443 THIS-HOST, then open https://127.0.0.1:8443/ui/\n")
}

func runLabDashboard(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("lab dashboard", "lab dashboard [--dir DIR] [--listen 127.0.0.1:8443]")
	dir := fs.String("dir", "/var/lib/ingot-lab", "the lab's folder")
	listen := fs.String("listen", "127.0.0.1:8443", "where on this host the dashboard answers (loopback: reach it from elsewhere through ssh -L)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	l, err := lab.Open(*dir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("lab dashboard: %w", err)
	}
	fmt.Fprintf(e.stdout, "lab: dashboard at https://%s/ui/ (CA %s, token %s); Ctrl-C ends it\n", ln.Addr(), l.State.CA, l.State.Token)
	return l.ForwardDashboard(ctx, ln)
}

func printResults(e *env, res []lab.Result) bool {
	ok := true
	for _, r := range res {
		if r.Job.State == wire.JobSucceeded {
			fmt.Fprintf(e.stdout, "lab: %s ready; %s\n", r.Machine, r.Restore())
			continue
		}
		ok = false
		fmt.Fprintf(e.stdout, "lab: %s FAILED: %s\n", r.Machine, r.Job.Reason)
	}
	return ok
}

func runLabDown(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("lab down", "lab down [--dir DIR]")
	dir := fs.String("dir", "/var/lib/ingot-lab", "the lab's folder")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := lab.Down(*dir); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "lab: down")
	return nil
}

func runLabStatus(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("lab status", "lab status [--dir DIR]")
	dir := fs.String("dir", "/var/lib/ingot-lab", "the lab's folder")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	l, err := lab.Open(*dir)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tFIRMWARE\tMAC\tSTATE\tBMC")
	for _, vm := range l.State.VMs {
		state := "?"
		if m, err := l.Machine(ctx, vm.Name); err == nil {
			state = string(m.State)
		}
		fw := vm.Firmware
		if vm.Arch != "" {
			fw += " " + vm.Arch
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t127.0.0.1:%d\n", vm.Name, fw, vm.MAC, state, vm.BMCPort)
	}
	return tw.Flush()
}

// runLabBMC is the lab's BMC process (started by lab up inside the namespace).
func runLabBMC(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("lab bmc", "lab bmc --dir DIR")
	dir := fs.String("dir", "/var/lib/ingot-lab", "the lab's folder")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	return lab.RunBMCs(ctx, *dir, e.logger("info"))
}
