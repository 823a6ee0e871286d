package bolt_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Environment of the writer child: the database path and a run tag that keeps
// names unique across runs on the same file.
const (
	envCrashDB  = "INGOT_STORE_CRASH_DB"
	envCrashRun = "INGOT_STORE_CRASH_RUN"
)

// TestCrashSafety re-executes this test binary as a writer that makes many
// small concurrent writes and prints one line per write after the call
// returned. The parent kills it with SIGKILL mid-stream, reopens the file,
// and checks that every reported write is there and the file is consistent.
// The same file is reused across runs, so each writer also starts from a
// file whose previous writer was killed.
func TestCrashSafety(t *testing.T) {
	if path := os.Getenv(envCrashDB); path != "" {
		crashWriter(path, os.Getenv(envCrashRun))
		return
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	var reported []string
	for run, killAfter := range []int{1, 40, 300, 1200} {
		lines, stderr := runAndKill(t, path, run, killAfter)
		if len(lines) < killAfter {
			t.Fatalf("run %d: writer printed %d lines before dying, want >= %d; stderr:\n%s", run, len(lines), killAfter, stderr)
		}
		reported = append(reported, lines...)
		verifyReported(t, path, reported)
		t.Logf("run %d: killed after %d lines (%d read in all)", run, killAfter, len(lines))
	}
}

// runAndKill starts the writer, kills it once it has reported killAfter
// writes, and returns every complete line it printed (including those still
// in the pipe when it died: they were printed after their commit too).
func runAndKill(t *testing.T, path string, run, killAfter int) ([]string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashSafety$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDB+"="+path, envCrashRun+"="+strconv.Itoa(run))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var lines []string
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if !isReport(line) {
			continue
		}
		lines = append(lines, line)
		if len(lines) == killAfter && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("writer was not killed by SIGKILL: %v; stderr:\n%s", err, stderr.String())
	}
	return lines, stderr.String()
}

func isReport(line string) bool {
	for _, p := range []string{"machine ", "event ", "lease ", "inventory "} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// verifyReported reopens the file, checks every reported write, and runs the
// consistency check.
func verifyReported(t *testing.T, path string, lines []string) {
	t.Helper()
	ctx := context.Background()
	s, err := bolt.Open(path, store.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("reopening after SIGKILL: %v", err)
	}
	missing := 0
	for _, line := range lines {
		if err := verifyLine(ctx, s, line); err != nil {
			missing++
			if missing <= 10 {
				t.Errorf("reported %q, but after the crash: %v", line, err)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d reported writes missing", missing, len(lines))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bolt.CheckFile(path); err != nil {
		t.Fatal(err)
	}
}

func verifyLine(ctx context.Context, s *bolt.Store, line string) error {
	f := strings.Fields(line)
	switch f[0] {
	case "machine": // machine ID NAME MAC
		m, err := s.MachineByMAC(ctx, f[3])
		if err != nil {
			return err
		}
		if m.ID != f[1] || m.Name != f[2] {
			return fmt.Errorf("MAC %s belongs to %s (%s)", f[3], m.Name, m.ID)
		}
	case "event": // event MACHINE SEQ MESSAGE
		seq, _ := strconv.ParseUint(f[2], 10, 64)
		evs, err := s.Events(ctx, f[1], seq-1, 1)
		if err != nil {
			return err
		}
		if len(evs) != 1 || evs[0].Seq != seq || evs[0].Message != f[3] {
			return fmt.Errorf("events after %d: %+v", seq-1, evs)
		}
	case "lease": // lease MAC IP
		l, err := s.LeaseByIP(ctx, netip.MustParseAddr(f[2]))
		if err != nil {
			return err
		}
		if l.MAC != f[1] {
			return fmt.Errorf("IP %s is leased to %s", f[2], l.MAC)
		}
	case "inventory": // inventory MACHINE SEQ SERIAL
		seq, _ := strconv.ParseUint(f[2], 10, 64)
		snap, err := s.Inventory(ctx, f[1], seq)
		if err != nil {
			return err
		}
		if snap.Inventory.System.Serial != f[3] {
			return fmt.Errorf("snapshot %d has serial %q", seq, snap.Inventory.System.Serial)
		}
	}
	return nil
}

// crashWriter writes until it is killed (or 15 s pass), printing each write
// only after the store call returned nil.
func crashWriter(path, run string) {
	ctx := context.Background()
	s, err := bolt.Open(path, store.Options{History: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // one write(2) per line, unbuffered
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(4)
	}
	r, _ := strconv.Atoi(run)
	var n atomic.Uint32 // unique MACs and IPs within this run
	macOf := func(v uint32) string {
		return fmt.Sprintf("02:%02x:00:%02x:%02x:%02x", r, byte(v>>16), byte(v>>8), byte(v))
	}
	mac := func() string { return macOf(n.Add(1)) }
	var bases []string
	for i := 0; i < 4; i++ {
		m := machine.Machine{Name: fmt.Sprintf("base-%s-%d", run, i), MACs: []string{mac()}}
		if err := s.CreateMachine(ctx, &m); err != nil {
			fail(err)
		}
		report("machine %s %s %s", m.ID, m.Name, m.MACs[0])
		bases = append(bases, m.ID)
	}
	deadline := time.Now().Add(15 * time.Second)
	var wg sync.WaitGroup
	spawn := func(count int, fn func(g, i int)) {
		for g := 0; g < count; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					fn(g, i)
				}
			}()
		}
	}
	spawn(16, func(g, i int) {
		id := bases[(g+i)%len(bases)]
		msg := fmt.Sprintf("g%d-i%d", g, i)
		ev, err := s.AppendEvent(ctx, machine.Event{Machine: id, Kind: "test", Actor: "crash", Message: msg})
		if err != nil {
			fail(err)
		}
		report("event %s %d %s", id, ev.Seq, msg)
	})
	spawn(16, func(_, _ int) {
		v := n.Add(1)
		m := macOf(v)
		ip := netip.AddrFrom4([4]byte{10, byte(r), byte(v >> 8), byte(v)})
		l := store.Lease{MAC: m, IP: ip, State: "bound", Expires: time.Now().Add(time.Hour)}
		if err := s.PutLease(ctx, l); err != nil {
			fail(err)
		}
		report("lease %s %s", m, ip)
	})
	spawn(2, func(g, i int) {
		m := machine.Machine{Name: fmt.Sprintf("w-%s-%d-%d", run, g, i), MACs: []string{mac()}}
		if err := s.CreateMachine(ctx, &m); err != nil {
			fail(err)
		}
		report("machine %s %s %s", m.ID, m.Name, m.MACs[0])
	})
	spawn(1, func(_, i int) {
		id := bases[i%len(bases)]
		serial := fmt.Sprintf("SN-%s-%d", run, i)
		seq, err := s.PutInventory(ctx, id, machine.Inventory{Source: "agent", System: machine.System{Serial: serial},
			DIMMs: make([]machine.DIMM, 16)})
		if err != nil {
			fail(err)
		}
		report("inventory %s %d %s", id, seq, serial)
	})
	wg.Wait()
	s.Close()
}
