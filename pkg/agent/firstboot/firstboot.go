// Package firstboot collects what the installed OS runs (kernel, OS
// release, driver versions) for its first-boot report to ingot
// (POST /api/v1/agent/firstboot), so the engine can check the recipe's pins.
// `ingot-agent firstboot` runs it from the golden image's first-boot unit.
package firstboot

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// DefaultTimeout bounds each program Collect runs (nvidia-smi can hang on
// a GPU that has fallen off the bus).
const DefaultTimeout = 20 * time.Second

// Collector reads the software facts of a system.
type Collector struct {
	// Root is where the system's /proc, /sys, /etc and /usr are ("/" on
	// the machine).
	Root string
	// Run runs a program of the system and returns its standard output.
	// nil: no program is run and only files under Root are read (the right
	// thing when Root is not the running system).
	Run Runner
	// Timeout bounds each Run; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Collect reads the software facts under root. On the running system
// (root "/") it also runs the drivers' tools (nvidia-smi, ofed_info, ...),
// each within DefaultTimeout; under any other root it reads files only.
func Collect(root string) (machine.Software, error) {
	c := Collector{Root: root}
	if filepath.Clean(root) == "/" {
		c.Run = Exec
	}
	return c.Collect(context.Background())
}

// Collect reads the running kernel from proc/sys/kernel/osrelease,
// PRETTY_NAME from etc/os-release, and every driver of recipe.DriverKeys
// the system has (see driverSources). A driver whose file is absent or
// whose tool is missing, fails or times out is not reported.
func (c Collector) Collect(ctx context.Context) (machine.Software, error) {
	var s machine.Software
	k, err := os.ReadFile(filepath.Join(c.Root, "proc/sys/kernel/osrelease"))
	if err != nil {
		return s, fmt.Errorf("reading the kernel release: %w", err)
	}
	s.Kernel = strings.TrimSpace(string(k))
	if b, err := os.ReadFile(filepath.Join(c.Root, "etc/os-release")); err == nil {
		s.OSRelease = OSRelease(b)
	} else if b, err := os.ReadFile(filepath.Join(c.Root, "usr/lib/os-release")); err == nil {
		s.OSRelease = OSRelease(b)
	}
	s.Hostname, s.CloudInit = c.hostname(), c.cloudInit(ctx)
	for _, src := range driverSources() {
		if v := c.first(ctx, src.reads); v != "" {
			if s.Drivers == nil {
				s.Drivers = map[string]string{}
			}
			s.Drivers[src.key] = v
		}
	}
	return s, nil
}

// first returns the first version one of the reads finds.
func (c Collector) first(ctx context.Context, reads []read) string {
	for _, r := range reads {
		var (
			b   []byte
			err error
		)
		switch {
		case r.file != "":
			b, err = os.ReadFile(filepath.Join(c.Root, r.file))
		case c.Run != nil:
			b, err = c.run(ctx, r.prog, r.args...)
		default:
			continue
		}
		if err != nil {
			continue
		}
		if v := r.parse(b); v != "" {
			return v
		}
	}
	return ""
}

func (c Collector) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	t := c.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	return c.Run(ctx, name, args...)
}

// OSRelease returns PRETTY_NAME (else NAME VERSION_ID) of an os-release file.
func OSRelease(b []byte) string {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok {
			kv[k] = strings.Trim(v, `"'`)
		}
	}
	if p := kv["PRETTY_NAME"]; p != "" {
		return p
	}
	return strings.TrimSpace(kv["NAME"] + " " + kv["VERSION_ID"])
}
