// Package firstboot collects what the installed OS runs (kernel, OS
// release, driver versions) for its first-boot report to ingot
// (POST /api/v1/agent/firstboot), so the engine can check the recipe's pins.
// `ingot-agent firstboot` runs it from the golden image's first-boot unit.
package firstboot

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// DriverModules maps the kernel modules whose version is reported to the
// driver names recipes pin (drivers: {nvidia: 535.309.01}).
func DriverModules() map[string]string {
	return map[string]string{"nvidia": "nvidia", "mlx5_core": "ofed", "amdgpu": "amdgpu"}
}

// Collect reads the software facts under root ("/" on the machine):
// the running kernel from proc/sys/kernel/osrelease, PRETTY_NAME from
// etc/os-release, and each driver module's sys/module/NAME/version (the
// NVIDIA driver also from proc/driver/nvidia/version).
func Collect(root string) (machine.Software, error) {
	var s machine.Software
	k, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease"))
	if err != nil {
		return s, fmt.Errorf("reading the kernel release: %w", err)
	}
	s.Kernel = strings.TrimSpace(string(k))
	if b, err := os.ReadFile(filepath.Join(root, "etc/os-release")); err == nil {
		s.OSRelease = OSRelease(b)
	} else if b, err := os.ReadFile(filepath.Join(root, "usr/lib/os-release")); err == nil {
		s.OSRelease = OSRelease(b)
	}
	for mod, name := range DriverModules() {
		if v, err := os.ReadFile(filepath.Join(root, "sys/module", mod, "version")); err == nil {
			if s.Drivers == nil {
				s.Drivers = map[string]string{}
			}
			s.Drivers[name] = strings.TrimSpace(string(v))
		}
	}
	if _, ok := s.Drivers["nvidia"]; !ok {
		if b, err := os.ReadFile(filepath.Join(root, "proc/driver/nvidia/version")); err == nil {
			if v := NvidiaVersion(b); v != "" {
				if s.Drivers == nil {
					s.Drivers = map[string]string{}
				}
				s.Drivers["nvidia"] = v
			}
		}
	}
	return s, nil
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

// NvidiaVersion reads the version from /proc/driver/nvidia/version:
// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Tue ...".
func NvidiaVersion(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "NVRM version:") {
			continue
		}
		f := strings.Fields(l)
		for i, w := range f {
			if w == "Module" && i+1 < len(f) {
				return f[i+1]
			}
		}
	}
	return ""
}
