//go:build integration

package deb

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/privcheck"
)

// The package installs into a fresh Debian 12 root; systemd-analyze accepts
// and scores its unit; and `ingot serve`, started exactly as the unit starts
// it (the ingot user, only the unit's capabilities, its umask, no new
// privileges) in a network namespace, answers DHCP, TFTP, HTTP and the API
// to real clients.
func TestIntegrationDebInstallAndServe(t *testing.T) {
	netnstest.Need(t, "mmdebstrap", "chroot", "mount", "setpriv", "busybox", "tftp", "curl", "make", "git")
	start := time.Now()
	deb := builtDebs(t)[runtime.GOARCH]
	root := freshRoot(t)
	t.Logf("packages and root ready: %v", time.Since(start).Round(time.Second))
	installDeb(t, root, deb)
	verifyUnit(t, root)
	configure(t, root)
	srv, cli := bootNetwork(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	journald := listenJournald(t, root)
	serve, stderr := startAsUnit(ctx, t, srv, root, readUnit(t, filepath.Join(root, "lib/systemd/system/ingot.service")), nil)
	answers(ctx, t, cli, root) // serve is up, past its exec chain
	checkProcess(t, root, serve.Process.Pid)
	checkJournal(t, journald, stderr)
	upgradeWhileServing(ctx, t, root, cli, serve)
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Errorf("ingot serve after SIGTERM: %v, want exit 0", err)
	}
	purgeKeepsData(t, root)
	t.Logf("whole test: %v", time.Since(start).Round(time.Second))
}

// installDeb installs the package with dpkg and checks what postinst made.
func installDeb(t *testing.T, root, deb string) {
	t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tmp/ingot.deb"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := inRoot(ctx, root, "dpkg", "-i", "/tmp/ingot.deb")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "enabled, not started") {
		t.Errorf("postinst did not say the server waits for its configuration:\n%s", out)
	}
	uid, gid := ingotIDs(t, root)
	for path, want := range map[string]string{"var/lib/ingot": fmt.Sprintf("drwxr-x--- %d:%d", uid, gid), "etc/ingot/bmc": fmt.Sprintf("drwxr-x--- 0:%d", gid)} {
		if got := owner(t, filepath.Join(root, path)); got != want {
			t.Errorf("/%s: %s, want %s", path, got, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/ingot.service")); err != nil || l != "/lib/systemd/system/ingot.service" {
		t.Errorf("ingot.service not enabled: %q %v", l, err)
	}
	if out, err := inRoot(ctx, root, "dpkg", "--verify", "ingot"); err != nil || len(out) > 0 {
		t.Errorf("dpkg --verify ingot: %v %s", err, out)
	}
}

// upgradeWhileServing installs the package over itself (dpkg's upgrade
// path: prerm upgrade, postinst configure OLD): the running server is
// neither stopped nor restarted, and still answers.
func upgradeWhileServing(ctx context.Context, t *testing.T, root string, cli *netns.NS, serve *exec.Cmd) {
	t.Helper()
	if out, err := inRoot(ctx, root, "dpkg", "-i", "/tmp/ingot.deb"); err != nil {
		t.Errorf("upgrade: %v\n%s", err, out)
	}
	if err := serve.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the server did not survive the upgrade: %v", err)
	}
	if out, err := cli.Run(ctx, "curl", "-sSf", "http://10.80.0.1:8080/healthz"); err != nil {
		t.Errorf("after the upgrade: %v %s", err, out)
	}
}

// purgeKeepsData: purge removes the configuration, keeps the fleet's data
// and the user.
func purgeKeepsData(t *testing.T, root string) {
	t.Helper()
	if out, err := inRoot(context.Background(), root, "dpkg", "--purge", "ingot"); err != nil {
		t.Fatalf("purge: %v\n%s", err, out)
	}
	for path, want := range map[string]bool{"var/lib/ingot/ingot.db": true, "etc/ingot/ingot.yaml": false, "usr/bin/ingot": false} {
		if _, err := os.Stat(filepath.Join(root, path)); (err == nil) != want {
			t.Errorf("after purge /%s: %v, want present %v", path, err, want)
		}
	}
	ingotIDs(t, root) // the user stays
}

// ingotIDs are the ingot user's uid and gid in root.
func ingotIDs(t *testing.T, root string) (int, int) {
	t.Helper()
	out, err := inRoot(context.Background(), root, "getent", "passwd", "ingot")
	if err != nil {
		t.Fatalf("no ingot user: %v", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	uid, _ := strconv.Atoi(f[2])
	gid, _ := strconv.Atoi(f[3])
	if uid == 0 || uid >= 1000 || f[6] != "/usr/sbin/nologin" {
		t.Errorf("ingot user %q: want a system uid and no shell", out)
	}
	return uid, gid
}

func owner(t *testing.T, path string) string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%s %d:%d", st.Mode(), sys.Uid, sys.Gid)
}

var exposure = regexp.MustCompile(`Overall exposure level for ingot\.service: ([0-9.]+)`)

// verifyUnit runs systemd-analyze verify and security on the installed unit.
func verifyUnit(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background()
	if out, err := inRoot(ctx, root, "systemd-analyze", "verify", "/lib/systemd/system/ingot.service"); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, _ := inRoot(ctx, root, "systemd-analyze", "security", "--offline=true", "ingot.service")
	m := exposure.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security ingot.service: %s", m[0])
	if score > 2.0 {
		t.Errorf("exposure %.1f: the unit lost hardening (1.6 when this test was written)\n%s", score, out)
	}
}

// unit is what ingot.service says about how serve runs.
type unit struct {
	ExecStart, User, Group, UMask []string
	Caps, Bounding                []string
	NoNewPrivileges               bool
}

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var u unit
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		switch k {
		case "ExecStart":
			u.ExecStart = strings.Fields(v)
		case "User":
			u.User = []string{v}
		case "Group":
			u.Group = []string{v}
		case "UMask":
			u.UMask = []string{v}
		case "AmbientCapabilities":
			u.Caps = strings.Fields(v)
		case "CapabilityBoundingSet":
			u.Bounding = strings.Fields(v)
		case "NoNewPrivileges":
			u.NoNewPrivileges = v == "yes"
		}
	}
	if len(u.ExecStart) == 0 || len(u.User) != 1 || len(u.Group) != 1 || len(u.UMask) != 1 || len(u.Caps) == 0 {
		t.Fatalf("unit %s: %+v", path, u)
	}
	return u
}

// setprivCaps turns CAP_NET_RAW CAP_X into -all,+net_raw,+x.
func setprivCaps(caps []string) string {
	s := "-all"
	for _, c := range caps {
		s += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	return s
}

// configure is the operator's edit of /etc/ingot/ingot.yaml: the boot
// interface, DHCP with a pool, TFTP.
func configure(t *testing.T, root string) {
	t.Helper()
	path := filepath.Join(root, "etc/ingot/ingot.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for old, repl := range map[string]string{`(?m)^#interface: ""$`: "interface: d0", `(?m)^dhcp: "off"$`: "dhcp: full",
		`(?m)^tftp: false$`: "tftp: true", `(?m)^#pool: \[\]$`: "pool:\n  - 10.80.0.0/24,10.80.0.100-10.80.0.150", `(?m)^#log_level: info$`: "log_level: debug"} {
		re := regexp.MustCompile(old)
		if !re.MatchString(s) {
			t.Fatalf("the shipped configuration has no line %s", old)
		}
		s = re.ReplaceAllString(s, repl)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bootNetwork is the server's namespace with bridge d0 = 10.80.0.1/24 and
// a client namespace whose eth0 is on that bridge.
func bootNetwork(t *testing.T) (srv, cli *netns.NS) {
	t.Helper()
	ctx := context.Background()
	srv, cli = netnstest.New(t, "debsrv"), netnstest.New(t, "debcli")
	if err := srv.AddBridge(ctx, "d0", "10.80.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := netns.Veth(ctx, cli, "eth0", "", srv, "v0@d0", ""); err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

// startAsUnit starts ExecStart in root as the unit would: its user and
// group with their groups, only its capabilities (ambient, inheritable and
// bounding), its umask, no new privileges, systemd's plain environment, and
// stderr a stream JOURNAL_STREAM names (systemd's stream to journald; here a
// file), plus env.
func startAsUnit(ctx context.Context, t *testing.T, srv *netns.NS, root string, u unit, env []string) (*exec.Cmd, *os.File) {
	t.Helper()
	args := []string{root, "/bin/sh", "-c", `umask "$1"; shift; exec "$@"`, "sh", u.UMask[0],
		"setpriv", "--reuid=" + u.User[0], "--regid=" + u.Group[0], "--init-groups",
		"--inh-caps=" + setprivCaps(u.Caps), "--ambient-caps=" + setprivCaps(u.Caps), "--bounding-set=" + setprivCaps(u.Bounding)}
	if u.NoNewPrivileges {
		args = append(args, "--no-new-privs")
	}
	cmd := srv.Command(ctx, "chroot", append(append(args, "--"), u.ExecStart...)...)
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
		fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)}, env...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := srv.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, _ := os.ReadFile(stderr.Name()); t.Failed() {
			t.Logf("ingot serve's stderr:\n%s", b)
		}
		stderr.Close()
	})
	return cmd, stderr
}

// checkJournal: serve logged to journald's socket, attributes as fields,
// and nothing as text on stderr.
func checkJournal(t *testing.T, j *fakeJournald, stderr *os.File) {
	t.Helper()
	for _, want := range []map[string]string{
		{"MESSAGE": "ingot serving", "SYSLOG_IDENTIFIER": "ingot", "PRIORITY": "6", "INTERFACE": "d0", "DHCP": "full"},
		{"MESSAGE": "dhcp serving", "SERVICE": "dhcp", "MODE": "full"},
		{"MESSAGE": "tftp sent", "SERVICE": "tftp", "FILE": "undionly.kpxe"},
	} {
		if j.find(want) == nil {
			t.Errorf("no journal entry with %v among %d", want, j.count())
		}
	}
	if b, _ := os.ReadFile(stderr.Name()); len(b) > 0 {
		t.Errorf("serve wrote to stderr under journald:\n%s", b)
	}
}

// checkProcess reads the running server's identity and capabilities.
func checkProcess(t *testing.T, root string, pid int) {
	t.Helper()
	uid, _ := ingotIDs(t, root)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	caps, _ := privcheck.ParseStatus(b)
	want := privcheck.CapSet(0).With(privcheck.CapNetBindService, privcheck.CapNetRaw)
	if caps != want {
		t.Errorf("serve's effective capabilities %v, want %v", caps, want)
	}
	for _, line := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid), "NoNewPrivs:\t1", "CapBnd:\t0000000000002400", "CapAmb:\t0000000000002400"} {
		if !strings.Contains(string(b), line+"\n") {
			t.Errorf("/proc/%d/status lacks %q", pid, line)
		}
	}
}

// answers asks the server with real clients from the client namespace:
// busybox udhcpc gets an address (and configures it), tftp-hpa fetches
// iPXE, curl the boot listener and the API, the installed CLI the API.
func answers(ctx context.Context, t *testing.T, cli *netns.NS, root string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "udhcpc.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && ip addr add \"$ip/$mask\" dev \"$interface\" && echo \"bound ip=$ip server=$serverid\"\nexit 0\n"), 0o755)
	var out []byte
	var err error
	for i := 0; i < 30; i++ { // serve binds within a second or two
		if out, err = cli.Run(ctx, "busybox", "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "3", "-T", "1", "-s", script); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil || !regexp.MustCompile(`bound ip=10\.80\.0\.1[0-5][0-9] server=10\.80\.0\.1`).Match(out) {
		t.Fatalf("DHCP: %v\n%s", err, out)
	}
	got := filepath.Join(dir, "undionly.kpxe")
	if out, err := cli.Run(ctx, "tftp", "-m", "binary", "10.80.0.1", "-c", "get", "undionly.kpxe", got); err != nil {
		t.Errorf("TFTP: %v %s", err, out)
	} else if a, b := sum(t, got), sum(t, filepath.Join(root, "usr/lib/ipxe/undionly.kpxe")); a != b {
		t.Errorf("TFTP: undionly.kpxe differs from the root's ipxe package")
	}
	if out, err := cli.Run(ctx, "curl", "-sSf", "http://10.80.0.1:8080/ipxe?mac=52:54:00:aa:bb:cc&arch=bios"); err != nil || !strings.HasPrefix(string(out), "#!ipxe\n") {
		t.Errorf("HTTP /ipxe: %v %q", err, out)
	}
	ca, token := filepath.Join(root, "var/lib/ingot/tls/ca.pem"), filepath.Join(root, "var/lib/ingot/admin.token")
	tok, _ := os.ReadFile(token)
	if out, err := cli.Run(ctx, "curl", "-sSf", "--cacert", ca, "-H", "Authorization: Bearer "+strings.TrimSpace(string(tok)), "https://10.80.0.1:8443/api/v1/machines"); err != nil {
		t.Errorf("API: %v %s", err, out)
	}
	conn := []string{"--server", "https://10.80.0.1:8443", "--ca", ca, "--token-file", token}
	if out, err := cli.Run(ctx, filepath.Join(root, "usr/bin/ingot"), append([]string{"machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01"}, conn...)...); err != nil || !strings.Contains(string(out), "enrolled gpu-01") {
		t.Errorf("ingot machine add: %v %s", err, out)
	}
	uid, _ := ingotIDs(t, root)
	if o := owner(t, filepath.Join(root, "var/lib/ingot/ingot.db")); !strings.HasSuffix(o, fmt.Sprintf(" %d:%d", uid, uid)) || !strings.HasPrefix(o, "-rw-------") {
		t.Errorf("ingot.db: %s, want -rw------- owned by ingot (uid %d)", o, uid)
	}
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
