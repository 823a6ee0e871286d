package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent"
	"github.com/ingot-dev/ingot/pkg/agent/blockdev"
	"github.com/ingot-dev/ingot/pkg/agent/imagewrite"
	"github.com/ingot-dev/ingot/pkg/agent/inventory"
	"github.com/ingot-dev/ingot/pkg/agent/lldp"
	"github.com/ingot-dev/ingot/pkg/agent/netup"
	"github.com/ingot-dev/ingot/pkg/agent/pid1"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// run is the whole agent. As PID 1 it does not return.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	isInit := os.Getpid() == 1
	if !isInit && len(args) > 0 && args[0] == "firstboot" {
		return runFirstboot(ctx, args[1:], stdout, stderr)
	}
	if !isInit && len(args) > 0 && args[0] == "warm" {
		return runWarm(ctx, args[1:], stdout, stderr)
	}
	if isInit {
		// Before anything else: without /proc, /sys and /dev nothing works.
		mountErr := pid1.MountAll()
		pid1.EnsureConsole()
		if mountErr != nil {
			fmt.Fprintf(stdout, "ingot-agent: mounting: %v\n", mountErr)
		}
	}
	o, err := parseFlags(args, stderr, isInit)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fatal(o, agent.Config{}, stdout, err)
	}
	con := agent.NewConsole(stdout)
	level := slog.LevelInfo
	cfg, cerr := readConfig(o)
	if o.debug || cfg.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(con, &slog.HandlerOptions{Level: level}))
	if cerr != nil {
		return fatal(o, cfg, stdout, cerr)
	}
	for _, k := range cfg.Unknown {
		log.Warn("unknown kernel command line key ignored", "key", k)
	}
	if isInit {
		con.Mark("version %s as PID 1", version)
		if err := pid1.LoadModules(o.modules, log); err != nil {
			log.Warn("some modules did not load", "err", err)
		}
	}
	if isInit {
		// The DHCP client's crypto/rand would block on an unseeded CRNG.
		if credited, err := pid1.EnsureRandom(5 * time.Second); credited || err != nil {
			con.Mark("kernel random pool was not initialized: credited CPU jitter (give VMs virtio-rng) err=%v", err)
		}
	}
	// Hear LLDP from the start: a switch announces when the link comes up,
	// and ones that send every 30 s are heard before the inventory is read.
	started := time.Now()
	var ll *lldp.Listener
	if filepath.Clean(o.root) == "/" && cfg.LLDPWait > 0 {
		if ifs, err := net.Interfaces(); err == nil {
			var names []string
			for _, ifc := range netup.Candidates(ifs, "") {
				names = append(names, ifc.Name)
			}
			if ll, err = lldp.Start(names); err != nil {
				log.Warn("not listening for LLDP", "err", err)
			} else {
				defer ll.Close()
			}
		}
	}
	if o.net {
		l, err := netup.Up(ctx, netup.Config{Iface: cfg.Iface, ResolvConf: resolvConf(isInit), KeepLease: true, Logger: log})
		if err != nil {
			return fatal(o, cfg, con, fmt.Errorf("network: %w", err))
		}
		con.Mark("network up iface=%s mac=%s addr=%s router=%v", l.Iface, l.MAC, l.Addr.String(), l.Router)
	}
	a := newAgent(o, cfg, con, log, lldpUntil(ll, started.Add(cfg.LLDPWait)))
	out, err := a.Run(ctx)
	if err != nil {
		return fatal(o, cfg, con, err)
	}
	return handoff(o, cfg, con, log, out)
}

func readConfig(o options) (agent.Config, error) {
	var line []byte
	if o.cmdline != "" {
		b, err := os.ReadFile(o.cmdline)
		if err != nil && (o.server == "" || o.token == "") {
			return agent.Config{}, fmt.Errorf("reading the kernel command line: %w", err)
		}
		line = b
	}
	cfg, err := agent.ParseCmdline(string(line))
	if err != nil {
		return cfg, err
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Server, o.server)
	set(&cfg.Token, o.token)
	set(&cfg.Machine, o.machine)
	set(&cfg.Disk, o.disk)
	set(&cfg.Iface, o.iface)
	if o.onError != "" {
		cfg.OnError = agent.OnError(o.onError)
	}
	return cfg, cfg.Validate()
}

func resolvConf(isInit bool) string {
	if isInit {
		return "/etc/resolv.conf"
	}
	return ""
}

// lldpUntil is the inventory's LLDP source: what the listener started at
// agent start has heard, waiting for the rest until deadline. nil without a
// listener.
func lldpUntil(ll *lldp.Listener, deadline time.Time) func(context.Context, []string) map[string]machine.LLDPNeighbor {
	if ll == nil {
		return nil
	}
	return func(ctx context.Context, _ []string) map[string]machine.LLDPNeighbor {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		return ll.Wait(ctx)
	}
}

func newAgent(o options, cfg agent.Config, con *agent.Console, log *slog.Logger, heard func(context.Context, []string) map[string]machine.LLDPNeighbor) *agent.Agent {
	client := api.NewAgentClient(cfg.APIBase(), cfg.Token, log)
	client.MAC, client.CA = cfg.MAC, cfg.CA
	sysRoot := o.root + "/sys"
	return &agent.Agent{
		Config:  cfg,
		API:     client,
		Console: con,
		Logger:  log,
		Inventory: func(ctx context.Context) machine.Inventory {
			opts := inventory.Options{Root: o.root}
			if filepath.Clean(o.root) == "/" {
				// This host's own ports (not a --root tree's): mark the one
				// ingot is reached over, hear what each switch port says (LLDP).
				opts.BootIface, _ = inventory.BootIface(cfg.Server)
				opts.LLDP = heard
			}
			return inventory.Read(ctx, opts)
		},
		ListDisks:  func() ([]blockdev.Disk, error) { return blockdev.List(o.root) },
		OpenTarget: func(p string) (*imagewrite.Target, error) { return imagewrite.OpenTarget(p, sysRoot) },
		InstallFile: func(disk, path string, data []byte, mode os.FileMode) error {
			if o.installRoot != "" {
				return installUnder(o.installRoot, path, data, mode)
			}
			return pid1.InstallFile(disk, "/run/ingot/install", path, data, mode)
		},
		Image: &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: 60 * time.Second}},
	}
}

// handoff leaves the machine as the task says. As PID 1 a failed handoff
// falls back to reboot; as a process it prints what it would do.
func handoff(o options, cfg agent.Config, con *agent.Console, log *slog.Logger, out agent.Outcome) int {
	if o.handoff != "perform" {
		con.Mark("handoff %s (not performed: --handoff=print)", out.Handoff)
		return 0
	}
	con.Mark("handoff %s", out.Handoff)
	var err error
	switch out.Handoff {
	case api.HandoffPoweroff:
		err = pid1.Poweroff()
	case api.HandoffKexec:
		err = kexec(cfg, out, log)
		con.Mark("kexec failed, rebooting instead: %v", err)
		err = pid1.Reboot()
	default:
		err = pid1.Reboot()
	}
	con.Mark("handoff failed: %v", err)
	return hang(o)
}

func kexec(cfg agent.Config, out agent.Outcome, log *slog.Logger) error {
	if out.Disk == "" {
		return fmt.Errorf("no disk was written")
	}
	k, err := pid1.FindInstalledKernel(out.Disk, "/run/ingot/root")
	if err != nil {
		return err
	}
	cmdline := out.Task.Cmdline
	if !containsWord(cmdline, "root=") {
		cmdline = "root=" + k.Root + " ro " + cmdline
	}
	// For the installed OS's first-boot report: the job's first-boot secret
	// (never the agent's own credential, which works only from the agent).
	cmdline += fmt.Sprintf(" ingot.server=%s ingot.machine=%s", cfg.Server, out.Task.MachineID)
	if cfg.API != "" {
		cmdline += fmt.Sprintf(" ingot.api=%s ingot.ca=%s", cfg.API, cfg.CA)
	}
	if out.Task.FirstBootSecret != "" {
		cmdline += " ingot.firstboot=" + out.Task.FirstBootSecret
	}
	log.Info("kexec", "kernel", k.Kernel, "initrd", k.Initrd, "cmdline", cmdline)
	return pid1.Kexec(k.Kernel, k.Initrd, cmdline)
}

// installUnder writes path below root (the --install-root case).
func installUnder(root, path string, data []byte, mode os.FileMode) error {
	p := filepath.Join(root, filepath.Clean("/"+path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return durable.WriteFile(p, data, mode)
}

func containsWord(s, prefix string) bool {
	for _, w := range splitWords(s) {
		if len(w) >= len(prefix) && w[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

func splitWords(s string) []string {
	var out []string
	start := -1
	for i, r := range s + " " {
		if r == ' ' || r == '\t' {
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	return out
}

// fatal prints the reason; as PID 1 it then does what ingot.onerror says and
// never returns. (The failure was already posted to the server by the agent
// when it got that far.)
func fatal(o options, cfg agent.Config, w io.Writer, err error) int {
	fmt.Fprintf(w, "ingot-agent: fatal: %v\n", err)
	if !o.pid1 {
		return 1
	}
	switch cfg.OnError {
	case agent.OnErrorPoweroff:
		fmt.Fprintf(w, "ingot-agent: powering off (ingot.onerror=poweroff)\n")
		pid1.Poweroff()
	case agent.OnErrorReboot:
		fmt.Fprintf(w, "ingot-agent: rebooting (ingot.onerror=reboot)\n")
		pid1.Reboot()
	}
	fmt.Fprintf(w, "ingot-agent: waiting for the operator (ingot.onerror=wait)\n")
	return hang(o)
}

// hang keeps PID 1 alive forever, reaping children.
func hang(o options) int {
	if !o.pid1 {
		return 1
	}
	go pid1.Reap()
	for {
		time.Sleep(time.Hour)
	}
}
