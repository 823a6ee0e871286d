// Package agent is the imaging agent's core: it reads its configuration from
// the kernel command line, and runs one task from ingot's server (inventory,
// image write, acceptance checks) reporting each step through the agent API.
// Subpackages do the parts (blockdev, imagewrite, inventory, checks, netup,
// pid1); cmd/ingot-agent wires them for PID 1 of an initramfs.
package agent

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// OnError is what PID 1 does after a fatal error was reported.
type OnError string

// The choices of ingot.onerror.
const (
	OnErrorWait     OnError = "wait" // stay up for the operator (console, BMC)
	OnErrorPoweroff OnError = "poweroff"
	OnErrorReboot   OnError = "reboot"
)

// Config is the agent's configuration: kernel command line keys ingot.*,
// which cmd/ingot-agent's flags can override.
type Config struct {
	Server string // ingot.server=http://IP:PORT (required): boot files and artifacts
	// API is ingot.api=https://IP:PORT, the server's TLS API listener, and
	// CA is ingot.ca=sha256:HEX, the certificate pinned there (pkg/tlsca).
	// Without ingot.api the API is at Server.
	API     string
	CA      string
	Token   string // ingot.token=TOKEN (required): the machine's one-time bearer token
	Machine string // ingot.machine=ID: echoed in logs; the server knows it from the token
	// FirstBoot is ingot.firstboot=SECRET, the job's first-boot secret the
	// agent passes to a kexec'd installed kernel (read by `ingot-agent firstboot`).
	FirstBoot string
	OnError   OnError // ingot.onerror=wait|poweroff|reboot; default wait
	Iface     string  // ingot.iface=NAME: DHCP on this interface only
	Disk      string  // ingot.disk=/dev/X: write here, overriding the recipe's selector
	Debug     bool    // ingot.debug (or ingot.debug=1): verbose logs
	// Mode is ingot.mode: "discovery" when ingot's HTTP boot handed an
	// unknown machine the discovery agent, with no token; the agent then
	// posts its inventory identified by MAC (ingot.mac) and powers off.
	Mode string
	MAC  string // ingot.mac=aa:bb:...: the MAC the machine booted from
	// TaskWait bounds how long the agent keeps asking for its task while the
	// server answers 503 or cannot be reached: ingot.taskwait=10m.
	TaskWait time.Duration
	// LLDPWait bounds how long, from the agent's start, the inventory waits
	// to hear every port's LLDP: ingot.lldpwait=35s for switches that send
	// every 30 s; 0 turns listening off. Default 5 s.
	LLDPWait time.Duration
	// Unknown lists ingot.* keys this agent does not know (a newer server's).
	Unknown []string
}

// ParseCmdline reads the ingot.* keys of a kernel command line. Other
// words (console=ttyS0, quiet, initrd=...) are ignored. Values may be quoted
// as the kernel allows ("ingot.x=a b" or ingot.x="a b").
func ParseCmdline(s string) (Config, error) {
	cfg := Config{OnError: OnErrorWait, TaskWait: 10 * time.Minute, LLDPWait: 5 * time.Second}
	for _, w := range splitCmdline(s) {
		k, v, hasV := strings.Cut(w, "=")
		key, ok := strings.CutPrefix(k, "ingot.")
		if !ok {
			continue
		}
		switch key {
		case "server":
			cfg.Server = strings.TrimRight(v, "/")
		case "api":
			cfg.API = strings.TrimRight(v, "/")
		case "ca":
			cfg.CA = v
		case "token":
			cfg.Token = v
		case "machine":
			cfg.Machine = v
		case "firstboot":
			cfg.FirstBoot = v
		case "iface":
			cfg.Iface = v
		case "disk":
			cfg.Disk = v
		case "mode":
			cfg.Mode = v
		case "mac":
			cfg.MAC = v
		case "onerror":
			cfg.OnError = OnError(v)
		case "debug":
			cfg.Debug = !hasV || (v != "0" && v != "false" && v != "no")
		case "lldpwait":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return cfg, fmt.Errorf("kernel command line: ingot.lldpwait=%q: expected a duration such as 35s (0 to not listen)", v)
			}
			cfg.LLDPWait = d
		case "taskwait":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return cfg, fmt.Errorf("kernel command line: ingot.taskwait=%q: expected a duration such as 10m", v)
			}
			cfg.TaskWait = d
		default:
			cfg.Unknown = append(cfg.Unknown, k)
		}
	}
	return cfg, nil
}

// Validate checks what the agent needs to reach its server.
func (c Config) Validate() error {
	if c.Server == "" {
		return fmt.Errorf("ingot.server is missing: expected ingot.server=http://IP:PORT on the kernel command line (or --server)")
	}
	u, err := url.Parse(c.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("ingot.server=%q: expected an http:// or https:// URL with a host, e.g. http://10.77.0.1:8080", c.Server)
	}
	if c.API != "" {
		if u, err := url.Parse(c.API); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("ingot.api=%q: expected an https:// URL with a host, e.g. https://10.77.0.1:8443", c.API)
		}
		if c.CA == "" {
			return fmt.Errorf("ingot.api=%s without ingot.ca=sha256:...: the agent verifies the server only by the certificate it was told to pin", c.API)
		}
		if _, err := tlsca.ParseFingerprint(c.CA); err != nil {
			return fmt.Errorf("ingot.ca: %w", err)
		}
	}
	switch c.Mode {
	case "", "discovery":
	default:
		return fmt.Errorf("ingot.mode=%q: expected discovery (or no ingot.mode)", c.Mode)
	}
	if c.Token == "" && c.MAC == "" && !c.Discovery() {
		return fmt.Errorf("ingot.token is missing: expected the machine's boot credential on the kernel command line (or --token), " +
			"or ingot.mac=MAC to ask the server for it (UEFI HTTP boot, virtual media)")
	}
	if c.Token == "" && c.MAC == "" {
		return fmt.Errorf("ingot.mode=discovery without ingot.token needs ingot.mac=MAC to identify the machine")
	}
	switch c.OnError {
	case OnErrorWait, OnErrorPoweroff, OnErrorReboot:
	default:
		return fmt.Errorf("ingot.onerror=%q: expected wait, poweroff or reboot", c.OnError)
	}
	if c.Disk != "" && !strings.HasPrefix(c.Disk, "/") {
		return fmt.Errorf("ingot.disk=%q: expected an absolute path such as /dev/nvme0n1", c.Disk)
	}
	return nil
}

// APIBase is where the agent API is: ingot.api, else ingot.server.
func (c Config) APIBase() string {
	if c.API != "" {
		return c.API
	}
	return c.Server
}

// Discovery reports whether the agent was booted as the discovery agent.
func (c Config) Discovery() bool { return c.Mode == "discovery" }

// splitCmdline splits on spaces outside double quotes and drops the quotes,
// as the kernel's next_arg does.
func splitCmdline(s string) []string {
	var out []string
	var b strings.Builder
	inQ, any := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQ, any = !inQ, true
		case !inQ && (r == ' ' || r == '\t' || r == '\n'):
			if any {
				out = append(out, b.String())
			}
			b.Reset()
			any = false
		default:
			b.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, b.String())
	}
	return out
}
