package storm

import (
	"fmt"
	"net"
	"strings"
)

// bootScript is what an iPXE script tells the machine to load: the agent's
// kernel with its command line, and its initrd.
type bootScript struct {
	Kernel  string // URL
	Cmdline string // the kernel line's arguments after the URL
	Initrd  string // URL
}

// parseScript reads the commands of an agent boot script as iPXE would run
// them: "kernel URL ARGS", "initrd [--name NAME] URL", "boot". Comments
// and "echo" lines are skipped. A script that tells the machine to do
// anything else (exit, sanboot, chain) is not an agent boot: the error
// quotes its line, so a storm that boots machines to their disks instead
// fails with the reason the server gave.
func parseScript(s string) (bootScript, error) {
	var b bootScript
	lines := strings.Split(s, "\n")
	if strings.TrimSpace(lines[0]) != "#!ipxe" {
		return b, fmt.Errorf("script starts %q, expected #!ipxe", clip(lines[0]))
	}
	booted := false
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || f[0] == "echo" {
			continue
		}
		switch f[0] {
		case "kernel", "imgexec":
			if len(f) < 2 {
				return b, fmt.Errorf("script line %q: kernel without a URL", clip(line))
			}
			b.Kernel, b.Cmdline = f[1], strings.Join(f[2:], " ")
		case "initrd":
			args := f[1:]
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				if args[0] == "--name" && len(args) > 1 {
					args = args[1:]
				}
				args = args[1:]
			}
			if len(args) == 0 {
				return b, fmt.Errorf("script line %q: initrd without a URL", clip(line))
			}
			b.Initrd = args[0]
		case "boot":
			booted = true
		default:
			return b, fmt.Errorf("script says %q, expected kernel, initrd and boot", clip(line))
		}
	}
	switch {
	case b.Kernel == "" || b.Initrd == "":
		return b, fmt.Errorf("script names kernel %q and initrd %q, expected both", b.Kernel, b.Initrd)
	case !booted:
		return b, fmt.Errorf("script loads %s but never says boot", b.Kernel)
	}
	return b, nil
}

// expand fills the iPXE settings a boot file name may use (${net0/mac},
// ${mac}, with an optional :type such as :hexhyp) for mac, as iPXE does
// before it fetches the URL; an unknown setting is an error.
func expand(s string, mac net.HardwareAddr) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("boot file %q: unterminated ${", clip(s))
		}
		name, typ, _ := strings.Cut(s[i+2:i+j], ":")
		if name != "mac" && name != "net0/mac" {
			return "", fmt.Errorf("boot file names setting %q, the harness knows only ${mac} and ${net0/mac}", clip(name))
		}
		v := mac.String()
		switch typ {
		case "", "hex":
		case "hexhyp":
			v = strings.ReplaceAll(v, ":", "-")
		case "hexraw":
			v = strings.ReplaceAll(v, ":", "")
		default:
			return "", fmt.Errorf("boot file setting %s has type %q, expected hex, hexhyp or hexraw", name, clip(typ))
		}
		out.WriteString(s[:i])
		out.WriteString(v)
		s = s[i+j+1:]
	}
}

// clip shortens what an error quotes from the network.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
