package inventory

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

func readCPUs(root string) ([]machine.CPU, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/cpuinfo"))
	if err != nil {
		return nil, fmt.Errorf("reading cpuinfo: %w", err)
	}
	cpus := ParseCPUInfo(b)
	if len(cpus) == 0 {
		return nil, fmt.Errorf("%s: no processor entries", filepath.Join(root, "proc/cpuinfo"))
	}
	if khz, err := strconv.Atoi(readString(filepath.Join(root, "sys/devices/system/cpu/cpu0/cpufreq"), "cpuinfo_max_freq")); err == nil {
		for i := range cpus {
			cpus[i].MaxMHz = khz / 1000
		}
	}
	return cpus, nil
}

// ParseCPUInfo groups /proc/cpuinfo's logical processors by socket
// ("physical id"): one CPU per socket with its cores and threads.
func ParseCPUInfo(b []byte) []machine.CPU {
	type sock struct {
		cpu   machine.CPU
		cores map[string]bool
	}
	socks := map[string]*sock{}
	flush := func(kv map[string]string) {
		if _, ok := kv["processor"]; !ok {
			return
		}
		id := kv["physical id"]
		if id == "" {
			id = "0"
		}
		s := socks[id]
		if s == nil {
			s = &sock{cpu: machine.CPU{Socket: "CPU" + id, Vendor: vendorName(kv["vendor_id"]), Model: kv["model name"]}, cores: map[string]bool{}}
			socks[id] = s
		}
		s.cpu.Threads++
		s.cores[kv["core id"]] = true
		if n, err := strconv.Atoi(kv["cpu cores"]); err == nil && n > s.cpu.Cores {
			s.cpu.Cores = n
		}
	}
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush(kv)
			kv = map[string]string{}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	flush(kv)
	ids := make([]string, 0, len(socks))
	for id := range socks {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, ea := strconv.Atoi(ids[i])
		b, eb := strconv.Atoi(ids[j])
		if ea == nil && eb == nil {
			return a < b
		}
		return ids[i] < ids[j]
	})
	out := make([]machine.CPU, 0, len(ids))
	for _, id := range ids {
		s := socks[id]
		if s.cpu.Cores == 0 {
			s.cpu.Cores = len(s.cores)
		}
		out = append(out, s.cpu)
	}
	return out
}

func vendorName(id string) string {
	switch id {
	case "GenuineIntel":
		return "Intel"
	case "AuthenticAMD":
		return "AMD"
	}
	return id
}
