package privcheck

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Current reads this process's System: its effective capabilities (CapEff of
// /proc/self/status), effective uid, the unprivileged port start of its
// network namespace and the kernel's version.
func Current() (System, error) {
	caps, err := Effective()
	if err != nil {
		return System{}, err
	}
	sys := System{Caps: caps, UID: os.Geteuid(), UnprivilegedPortStart: 1024, Access: access}
	if u, err := user.LookupId(strconv.Itoa(sys.UID)); err == nil {
		sys.User = u.Username
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			sys.UnprivilegedPortStart = n
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		sys.Kernel = ParseKernel(unix.ByteSliceToString(u.Release[:]))
	}
	return sys, nil
}

// ParseKernel reads major and minor from a release such as
// "6.1.0-21-amd64"; {0, 0} when it cannot.
func ParseKernel(release string) [2]int {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return [2]int{}
	}
	major, err1 := strconv.Atoi(parts[0])
	minorDigits := strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	minor, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil {
		return [2]int{}
	}
	return [2]int{major, minor}
}

// access asks the kernel with the effective ids (AT_EACCESS), as the open
// will: a read-only mount (ProtectSystem=strict) answers EROFS.
func access(path string, write bool) error {
	mode := uint32(unix.R_OK)
	if write {
		mode = unix.W_OK
	}
	if st, err := os.Stat(path); err != nil {
		return err
	} else if st.IsDir() {
		mode |= unix.X_OK
	}
	if err := unix.Faccessat(unix.AT_FDCWD, path, mode, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "access", Path: path, Err: err}
	}
	return nil
}

// Error joins the required problems into one error for serve to return, or
// nil when there are none.
func Error(sys System, problems []Problem) error {
	var b strings.Builder
	for _, p := range problems {
		if !p.Optional {
			fmt.Fprintf(&b, "\n  - %s", p.Message)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	who := fmt.Sprintf("uid %d", sys.UID)
	if sys.User != "" {
		who += " (" + sys.User + ")"
	}
	return fmt.Errorf("ingot serve cannot do what its configuration asks, as %s with capabilities %s:%s\n"+
		"Run it through ingot.service (User=ingot with CAP_NET_BIND_SERVICE and CAP_NET_RAW), as root, or grant what is named "+
		"(AmbientCapabilities=, setpriv --ambient-caps), or change the settings named", who, sys.Caps, b.String())
}
