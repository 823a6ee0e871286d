// Package privcheck tells, before `ingot serve` opens anything, what it
// lacks to do what its configuration asks: a capability ("router
// advertisements on eth1 open a raw ICMPv6 socket: need CAP_NET_RAW") or a
// permission ("/var/lib/ingot is not writable by uid 998 (ingot)"), each
// with why and how to do without, instead of a bare EPERM from deep inside
// a service later. Needs is a pure function of the plan and the system's
// facts (ports below net.ipv4.ip_unprivileged_port_start, the kernel
// version); Check compares them with what the process has.
package privcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"sort"
	"strconv"
)

// Plan is what serve is configured to do that may need privileges.
type Plan struct {
	Interface string // the boot interface
	DHCP      string // full, proxy or off
	RA        bool   // IPv6 router advertisements on Interface
	TFTP      bool
	TFTPPort  int
	HTTPAddr  string // the boot listener, host:port
	APIAddr   string // the API listener; "" for none
	// Write are folders serve writes into (made when missing); Read are
	// files or folders it reads. A missing Read path is not this package's
	// business (serve says what it expected there).
	Write []Path
	Read  []Path
}

// Path is a file or folder and what serve keeps there.
type Path struct {
	Path string
	Why  string // "--data: the database, artifacts and the TLS CA"
}

// System is what Needs and Check read from the running system.
type System struct {
	Caps CapSet
	UID  int
	User string // the name of UID, "" when unknown
	// UnprivilegedPortStart is net.ipv4.ip_unprivileged_port_start of the
	// process's network namespace (1024 unless changed).
	UnprivilegedPortStart int
	Kernel                [2]int // major, minor
	// Access returns nil when the process may read (or, with write, write
	// into) path, else the error access(2) gives (fs.ErrNotExist for a
	// missing path).
	Access func(path string, write bool) error
}

// Need is one capability a planned action needs.
type Need struct {
	Cap      Cap
	What     string // "DHCP on eth1"
	Why      string // "binds UDP port 67"
	Without  string // what to do without it, "" when nothing
	Optional bool   // serve works without it, degraded as Without says
}

func (n Need) String() string {
	s := fmt.Sprintf("%s %s: needs %s", n.What, n.Why, n.Cap)
	if n.Without != "" {
		s += " (" + n.Without + ")"
	}
	return s
}

// Needs lists the capabilities p needs on sys, required ones first.
func Needs(p Plan, sys System) []Need {
	var out []Need
	bind := func(what, proto string, port int) {
		if port > 0 && port < sys.UnprivilegedPortStart {
			out = append(out, Need{Cap: CapNetBindService, What: what, Why: fmt.Sprintf("binds %s port %d", proto, port),
				Without: fmt.Sprintf("ports below %d are privileged here (net.ipv4.ip_unprivileged_port_start)", sys.UnprivilegedPortStart)})
		}
	}
	if p.DHCP == "full" || p.DHCP == "proxy" {
		dhcp := "DHCP on " + p.Interface
		bind(dhcp, "UDP", 67)
		if p.DHCP == "proxy" {
			bind(dhcp, "UDP", 4011)
		}
		if before(sys.Kernel, 5, 7) {
			out = append(out, Need{Cap: CapNetRaw, What: dhcp, Why: "binds its socket to the interface (SO_BINDTODEVICE, privileged before Linux 5.7)",
				Without: "or --dhcp off"})
		}
		if p.DHCP == "full" {
			out = append(out, Need{Cap: CapNetAdmin, What: dhcp, Why: "unicasts replies to clients without an address (RFC 2131 4.1; it writes their ARP entry) and enlarges its socket buffers",
				Without: "without it those replies are broadcast, which every client accepts, and buffers stay within net.core.rmem_max", Optional: true})
		}
	}
	if p.RA && p.Interface != "" {
		out = append(out, Need{Cap: CapNetRaw, What: "router advertisements on " + p.Interface, Why: "open a raw ICMPv6 socket (--ra)",
			Without: "or --ra=false: iPXE then waits ~14 s for IPv6 before it boots"})
	}
	if p.TFTP {
		bind("TFTP on "+p.Interface, "UDP", p.TFTPPort)
	}
	bind("the boot listener --http-addr "+p.HTTPAddr, "TCP", port(p.HTTPAddr))
	if p.APIAddr != "" {
		bind("the API listener --api-addr "+p.APIAddr, "TCP", port(p.APIAddr))
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].Optional && out[j].Optional })
	return out
}

// Problem is one thing the process lacks.
type Problem struct {
	Message  string
	Optional bool // serve runs without it, degraded
}

// Check returns what the process lacks for p: required problems first,
// then optional ones (warnings).
func Check(p Plan, sys System) []Problem {
	var out []Problem
	for _, n := range Needs(p, sys) {
		if !sys.Caps.Has(n.Cap) {
			out = append(out, Problem{Message: n.String(), Optional: n.Optional})
		}
	}
	who := fmt.Sprintf("uid %d", sys.UID)
	if sys.User != "" {
		who += " (" + sys.User + ")"
	}
	for _, w := range p.Write {
		dir, err := nearestExisting(w.Path, sys.Access)
		if err == nil {
			err = sys.Access(dir, true)
		}
		if err != nil {
			out = append(out, Problem{Message: fmt.Sprintf("%s is not writable by %s: %s (%v)", w.Path, who, w.Why, unwrapPath(err))})
		}
	}
	for _, r := range p.Read {
		if err := sys.Access(r.Path, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
			out = append(out, Problem{Message: fmt.Sprintf("%s is not readable by %s: %s (%v)", r.Path, who, r.Why, unwrapPath(err))})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].Optional && out[j].Optional })
	return out
}

// nearestExisting is path or, when it does not exist yet, the closest
// folder above it that does (serve makes the rest).
func nearestExisting(path string, access func(string, bool) error) (string, error) {
	p := filepath.Clean(path)
	for {
		err := access(p, false)
		if !errors.Is(err, fs.ErrNotExist) {
			return p, err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p, err
		}
		p = parent
	}
}

// unwrapPath drops the *fs.PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// port is addr's port number (0 when it has none or is not a host:port).
func port(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	if n, err := strconv.Atoi(p); err == nil {
		return n
	}
	if n, err := net.LookupPort("tcp", p); err == nil {
		return n
	}
	return 0
}

// before reports whether kernel version k is older than major.minor (an
// unknown version, 0.0, counts as current).
func before(k [2]int, major, minor int) bool {
	if k == [2]int{} {
		return false
	}
	return k[0] < major || (k[0] == major && k[1] < minor)
}
