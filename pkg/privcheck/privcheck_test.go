package privcheck

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeFS answers Access from a table: path -> error for read, write.
type fakeFS map[string][2]error

func (f fakeFS) access(path string, write bool) error {
	e, ok := f[path]
	if !ok {
		return &fs.PathError{Op: "access", Path: path, Err: fs.ErrNotExist}
	}
	if write {
		return e[1]
	}
	return e[0]
}

var (
	allCaps   = CapSet(1<<41 - 1)
	unitCaps  = CapSet(0).With(CapNetBindService, CapNetRaw)
	eacces    = &fs.PathError{Op: "access", Path: "x", Err: syscall.EACCES}
	erofs     = &fs.PathError{Op: "access", Path: "x", Err: syscall.EROFS}
	writable  = [2]error{nil, nil}
	readOnly  = [2]error{nil, eacces}
	roMount   = [2]error{nil, erofs}
	forbidden = [2]error{eacces, eacces}
)

// fullPlan is the packaged unit's serve with DHCP, TFTP and RA on eth1.
func fullPlan() Plan {
	return Plan{Interface: "eth1", DHCP: "full", RA: true, TFTP: true, TFTPPort: 69, HTTPAddr: ":8080", APIAddr: ":8443",
		Write: []Path{{"/var/lib/ingot", "--data: the database, artifacts and the TLS CA"}},
		Read:  []Path{{"/etc/ingot/recipes", "--recipes"}}}
}

func TestCheck(t *testing.T) {
	okFS := fakeFS{"/var/lib/ingot": writable, "/etc/ingot/recipes": readOnly}
	sys := func(caps CapSet, mods ...func(*System)) System {
		s := System{Caps: caps, UID: 998, User: "ingot", UnprivilegedPortStart: 1024, Kernel: [2]int{6, 1}, Access: okFS.access}
		for _, m := range mods {
			m(&s)
		}
		return s
	}
	const (
		bind67  = "DHCP on eth1 binds UDP port 67: needs CAP_NET_BIND_SERVICE (ports below 1024 are privileged here (net.ipv4.ip_unprivileged_port_start))"
		bind69  = "TFTP on eth1 binds UDP port 69: needs CAP_NET_BIND_SERVICE (ports below 1024 are privileged here (net.ipv4.ip_unprivileged_port_start))"
		raRaw   = "router advertisements on eth1 open a raw ICMPv6 socket (--ra): needs CAP_NET_RAW (or --ra=false: iPXE then waits ~14 s for IPv6 before it boots)"
		noAdmin = "DHCP on eth1 unicasts replies to clients without an address (RFC 2131 4.1; it writes their ARP entry) and enlarges its socket buffers: needs CAP_NET_ADMIN (without it those replies are broadcast, which every client accepts, and buffers stay within net.core.rmem_max)"
	)
	warn := Problem{Message: noAdmin, Optional: true}
	tests := map[string]struct {
		plan func(*Plan)
		sys  System
		want []Problem
	}{
		"root":                            {sys: sys(allCaps, func(s *System) { s.UID, s.User = 0, "root" })},
		"the unit's two caps":             {sys: sys(unitCaps), want: []Problem{warn}},
		"no capabilities":                 {sys: sys(0), want: []Problem{{Message: bind67}, {Message: raRaw}, {Message: bind69}, warn}},
		"without CAP_NET_RAW":             {sys: sys(CapSet(0).With(CapNetBindService, CapNetAdmin)), want: []Problem{{Message: raRaw}}},
		"without CAP_NET_RAW, --ra=false": {plan: func(p *Plan) { p.RA = false }, sys: sys(CapSet(0).With(CapNetBindService)), want: []Problem{warn}},
		"Linux 5.4 binds to the device only with CAP_NET_RAW": {plan: func(p *Plan) { p.RA = false }, sys: sys(CapSet(0).With(CapNetBindService), func(s *System) { s.Kernel = [2]int{5, 4} }),
			want: []Problem{{Message: "DHCP on eth1 binds its socket to the interface (SO_BINDTODEVICE, privileged before Linux 5.7): needs CAP_NET_RAW (or --dhcp off)"}, warn}},
		"Linux 5.7 does not":        {plan: func(p *Plan) { p.RA = false }, sys: sys(CapSet(0).With(CapNetBindService), func(s *System) { s.Kernel = [2]int{5, 7} }), want: []Problem{warn}},
		"unprivileged ports from 0": {sys: sys(CapSet(0).With(CapNetRaw), func(s *System) { s.UnprivilegedPortStart = 0 }), want: []Problem{warn}},
		"proxy mode binds 67 and 4011": {plan: func(p *Plan) { p.DHCP, p.RA, p.TFTP = "proxy", false, false },
			sys: sys(0, func(s *System) { s.UnprivilegedPortStart = 5000 }),
			want: []Problem{{Message: strings.ReplaceAll(bind67, "1024", "5000")},
				{Message: "DHCP on eth1 binds UDP port 4011: needs CAP_NET_BIND_SERVICE (ports below 5000 are privileged here (net.ipv4.ip_unprivileged_port_start))"}}},
		"HTTP on port 80 and the API on 443": {plan: func(p *Plan) {
			p.DHCP, p.RA, p.TFTP, p.HTTPAddr, p.APIAddr = "off", false, false, "10.0.0.1:80", "[::]:https"
		},
			sys: sys(0), want: []Problem{
				{Message: "the boot listener --http-addr 10.0.0.1:80 binds TCP port 80: needs CAP_NET_BIND_SERVICE (ports below 1024 are privileged here (net.ipv4.ip_unprivileged_port_start))"},
				{Message: "the API listener --api-addr [::]:https binds TCP port 443: needs CAP_NET_BIND_SERVICE (ports below 1024 are privileged here (net.ipv4.ip_unprivileged_port_start))"}}},
		"nothing on the boot network": {plan: func(p *Plan) { p.DHCP, p.TFTP, p.Interface = "off", false, "" }, sys: sys(0)},
		"data not writable": {sys: sys(unitCaps, func(s *System) {
			s.Access = fakeFS{"/var/lib/ingot": readOnly, "/etc/ingot/recipes": readOnly}.access
		}), want: []Problem{{Message: "/var/lib/ingot is not writable by uid 998 (ingot): --data: the database, artifacts and the TLS CA (permission denied)"}, warn}},
		"data missing, its parent writable": {sys: sys(unitCaps, func(s *System) { s.Access = fakeFS{"/var/lib": writable}.access }), want: []Problem{warn}},
		"data missing on a read-only mount": {sys: sys(unitCaps, func(s *System) { s.Access = fakeFS{"/var/lib": roMount, "/var": roMount, "/": roMount}.access }),
			want: []Problem{{Message: "/var/lib/ingot is not writable by uid 998 (ingot): --data: the database, artifacts and the TLS CA (read-only file system)"}, warn}},
		"recipes unreadable": {sys: sys(unitCaps, func(s *System) {
			s.Access = fakeFS{"/var/lib/ingot": writable, "/etc/ingot/recipes": forbidden}.access
			s.User = ""
		}), want: []Problem{{Message: "/etc/ingot/recipes is not readable by uid 998: --recipes (permission denied)"}, warn}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := fullPlan()
			if tc.plan != nil {
				tc.plan(&p)
			}
			if d := cmp.Diff(tc.want, Check(p, tc.sys)); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestError(t *testing.T) {
	sys := System{Caps: CapSet(0).With(CapNetBindService), UID: 998, User: "ingot"}
	if err := Error(sys, []Problem{{Message: "x", Optional: true}}); err != nil {
		t.Errorf("warnings only: %v, want nil", err)
	}
	err := Error(sys, []Problem{{Message: "router advertisements on eth1 ...: needs CAP_NET_RAW"}, {Message: "w", Optional: true}})
	if err == nil {
		t.Fatal("nil error for a required problem")
	}
	for _, want := range []string{"as uid 998 (ingot) with capabilities CAP_NET_BIND_SERVICE:", "\n  - router advertisements on eth1 ...: needs CAP_NET_RAW\n", "ingot.service"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "- w") {
		t.Errorf("%q names a warning", err)
	}
}

func TestParseStatus(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    CapSet
		wantErr bool
	}{
		// proc(5)'s layout; values written from capability.h's numbers.
		"root":     {in: "Name:\tingot\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n", want: 0x1ffffffffff},
		"the unit": {in: "Uid:\t998\t998\t998\t998\nCapEff:\t0000000000002400\nCapBnd:\t0000000000002400\nCapAmb:\t0000000000002400\n", want: unitCaps},
		"none":     {in: "CapEff:\t0000000000000000\n", want: 0},
		"missing":  {in: "Name:\tx\nCapPrm:\t0\n", wantErr: true},
		"garbage":  {in: "CapEff:\tzz\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseStatus([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseStatus = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if s := unitCaps.String(); s != "CAP_NET_BIND_SERVICE,CAP_NET_RAW" {
		t.Errorf("String() = %q", s)
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("CapEff:\t0000000000002400\n"))
	f.Add([]byte("Name:\tx\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n"))
	f.Add([]byte("CapEff: ffffffffffffffffff\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatus(b)
		if err != nil && s != 0 {
			t.Errorf("error %v with a set %v", err, s)
		}
		_ = s.String()
	})
}

func TestParseKernel(t *testing.T) {
	for in, want := range map[string][2]int{"6.1.0-21-amd64": {6, 1}, "5.4.0": {5, 4}, "5.10+": {5, 10}, "6.18.44-fc-v1252": {6, 18}, "junk": {}, "6": {}} {
		if got := ParseKernel(in); got != want {
			t.Errorf("ParseKernel(%q) = %v, want %v", in, got, want)
		}
	}
}

// Current reads the real process: its CapEff matches /proc/self/status and
// the real access(2) answers for a folder it made.
func TestCurrent(t *testing.T) {
	sys, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if sys.UID != os.Geteuid() || sys.UnprivilegedPortStart < 0 || sys.Kernel == [2]int{} {
		t.Errorf("Current() = %+v", sys)
	}
	dir := t.TempDir()
	if err := sys.Access(dir, true); err != nil {
		t.Errorf("own temp dir not writable: %v", err)
	}
	if err := sys.Access(dir+"/missing", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing path: %v, want not-exist", err)
	}
}
