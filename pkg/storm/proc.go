package storm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcCPU is a process's CPU time so far (utime + stime of
// /proc/PID/stat); 0 when it cannot be read.
func ProcCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)       // utime, field 14
	s, _ := strconv.ParseInt(f[12], 10, 64)       // stime, field 15
	return time.Duration(u+s) * time.Second / 100 // USER_HZ
}

// ProcMemory is a process's resident set now and at its peak (VmRSS and
// VmHWM of /proc/PID/status), in bytes; 0 when it cannot be read.
func ProcMemory(pid int) (rss, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v) // "123456 kB"
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak
}
