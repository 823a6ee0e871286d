package privcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Cap is a Linux capability, numbered as in <linux/capability.h>.
type Cap uint

// The capabilities ingot serve may use.
const (
	CapNetBindService Cap = 10 // bind ports below net.ipv4.ip_unprivileged_port_start
	CapNetAdmin       Cap = 12 // write ARP entries (SIOCSARP), SO_RCVBUFFORCE
	CapNetRaw         Cap = 13 // raw sockets; SO_BINDTODEVICE before Linux 5.7
)

var capNames = map[Cap]string{CapNetBindService: "CAP_NET_BIND_SERVICE", CapNetAdmin: "CAP_NET_ADMIN", CapNetRaw: "CAP_NET_RAW"}

func (c Cap) String() string {
	if n, ok := capNames[c]; ok {
		return n
	}
	return fmt.Sprintf("capability %d", uint(c))
}

// CapSet is a capability bit mask, as /proc/PID/status prints it.
type CapSet uint64

// Has reports whether c is in the set.
func (s CapSet) Has(c Cap) bool { return c < 64 && s&(1<<c) != 0 }

// With returns the set with c added.
func (s CapSet) With(c ...Cap) CapSet {
	for _, x := range c {
		s |= 1 << x
	}
	return s
}

// String names the capabilities ingot knows, the rest by number.
func (s CapSet) String() string {
	var names []string
	for c := Cap(0); c < 64; c++ {
		if s.Has(c) {
			names = append(names, c.String())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	if len(names) > 8 {
		return fmt.Sprintf("%d capabilities (%#x)", len(names), uint64(s))
	}
	return strings.Join(names, ",")
}

// ParseStatus returns the effective set (the CapEff line) of a
// /proc/PID/status file's contents (proc(5): 16 hex digits).
func ParseStatus(b []byte) (CapSet, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "CapEff" {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("CapEff %q: expected a hexadecimal mask: %w", strings.TrimSpace(value), err)
		}
		return CapSet(v), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no CapEff line (expected /proc/PID/status)")
}

// Effective reads this process's effective capabilities.
func Effective() (CapSet, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading capabilities: %w", err)
	}
	s, err := ParseStatus(b)
	if err != nil {
		return 0, fmt.Errorf("reading capabilities from /proc/self/status: %w", err)
	}
	return s, nil
}
