package bolt_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// damageOffsets are where in a page one byte is flipped: every field of
// the page header and the first elements.
var damageOffsets = []int{0, 3, 7, 8, 9, 10, 11, 12, 15, 16, 19, 20, 24, 27, 28, 32, 36, 40, 44, 48}

// TestDamageSweep flips, one at a time, a byte at the header and first
// elements of every page of a real populated database (a backup of 150
// machines with inventories and events: the file that crashed serve and
// `admin check` with SIGSEGV had one byte flipped 40 bytes into page 11),
// and truncates it at every page boundary. Each case runs in a child
// process under a timeout: opening it must fail with ErrDamaged naming
// the file, or succeed and serve what is intact (list, read and check
// every machine, each failure an error); a crash or a hang fails the case.
func TestDamageSweep(t *testing.T) {
	if os.Getenv("INGOT_DAMAGE_CHILD") != "" {
		t.Skip("the child process of TestDamageSweep runs TestDamageChild")
	}
	base := storetest.PopulatedBackup(t, 150)
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := len(raw) / page
	var cases []string
	for p := range pages {
		for _, off := range damageOffsets {
			cases = append(cases, fmt.Sprintf("flip %d %d", p, off))
		}
		if p > 0 {
			cases = append(cases, fmt.Sprintf("truncate %d", p))
		}
	}
	results := runDamageCases(t, base, cases)
	refused, served := 0, 0
	for _, c := range cases {
		switch r := results[c]; {
		case strings.HasPrefix(r, "refused"):
			refused++
		case strings.HasPrefix(r, "served"):
			served++
		default:
			t.Errorf("%s: %s", c, r)
		}
	}
	t.Logf("%d pages, %d cases: %d refused with the file named, %d opened and served what is intact", pages, len(cases), refused, served)
}

// runDamageCases runs the cases in a child process, starting it again
// after each case that crashed or hung; it returns each case's outcome.
func runDamageCases(t *testing.T, base string, cases []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for next := 0; next < len(cases); {
		list := filepath.Join(t.TempDir(), "cases")
		if err := os.WriteFile(list, []byte(strings.Join(cases[next:], "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestDamageChild$", "-test.v")
		cmd.Env = append(os.Environ(), "INGOT_DAMAGE_CHILD="+base, "INGOT_DAMAGE_CASES="+list, "GOTRACEBACK=single")
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		current := ""
		for done := false; !done; {
			select {
			case l, ok := <-lines:
				if !ok {
					done = true
					break
				}
				if c, ok := strings.CutPrefix(l, "CASE "); ok {
					current = c
				} else if r, ok := strings.CutPrefix(l, "RESULT "); ok && current != "" {
					out[current], current = r, ""
					next++
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				out[current] = "hung: no answer within 20 s"
				next++
				current = ""
				for range lines {
				}
				done = true
			}
		}
		cmd.Wait()
		cancel()
		if current != "" {
			out[current] = "crashed: " + lastLines(stdout, stderr.String())
			next++
		}
	}
	return out
}

// lastLines is a crash's panic line and the frames of ingot and bbolt.
func lastLines(_ any, s string) string {
	var keep []string
	for i, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if i == 0 || strings.Contains(l, "ingot-dev") || strings.Contains(l, "bbolt") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	if len(keep) > 12 {
		keep = keep[:12]
	}
	return strings.Join(keep, " | ")
}

// TestDamageChild is the child of TestDamageSweep: it runs each case of
// INGOT_DAMAGE_CASES on a copy of INGOT_DAMAGE_CHILD and prints its
// outcome. Outside the sweep it does nothing.
func TestDamageChild(t *testing.T) {
	base := os.Getenv("INGOT_DAMAGE_CHILD")
	if base == "" {
		return
	}
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := os.ReadFile(os.Getenv("INGOT_DAMAGE_CASES"))
	dir := t.TempDir()
	for i, c := range strings.Split(string(list), "\n") {
		path := filepath.Join(dir, fmt.Sprintf("case-%d.db", i))
		if err := os.WriteFile(path, damage(raw, c), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("CASE %s\n", c)
		fmt.Printf("RESULT %s\n", openDamaged(path))
		os.Remove(path)
	}
}

// damage applies one case to a copy of raw.
func damage(raw []byte, c string) []byte {
	f := strings.Fields(c)
	p, _ := strconv.Atoi(f[1])
	out := append([]byte(nil), raw...)
	if f[0] == "truncate" {
		return out[:p*4096]
	}
	off, _ := strconv.Atoi(f[2])
	out[p*4096+off] ^= 0xff
	return out
}

// openDamaged opens a damaged file as serve would and reads all of it.
func openDamaged(path string) string {
	s, err := bolt.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, store.ErrDamaged) && strings.Contains(err.Error(), path) {
			return "refused"
		}
		if strings.Contains(err.Error(), path) {
			return "refused (" + strings.SplitN(err.Error(), "\n", 2)[0] + ")"
		}
		return "error without the file's name: " + err.Error()
	}
	defer s.Close()
	ctx := context.Background()
	ms, err := s.ListMachines(ctx, store.MachineFilter{})
	for _, m := range ms {
		_, _ = s.Events(ctx, m.ID, 0, 0)
		_, _ = s.Inventories(ctx, m.ID)
	}
	cerr := s.Check(ctx)
	return fmt.Sprintf("served: %d machines listed (list error: %v; check: %v)", len(ms), err != nil, cerr != nil)
}
