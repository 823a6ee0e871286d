package vbmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// QEMU is a Backend that powers a QEMU virtual machine: power on starts a
// qemu-system-x86_64 process booting from the override's device, power off
// stops it, and the process ending by itself (guest poweroff, or a reboot
// under -no-reboot) turns the PowerState Off. It is a MediaBackend too:
// an image inserted through the BMC's virtual media is fetched at power-on
// and attached as an IDE CD drive (qemu_media.go).
type QEMU struct {
	// Binary is the QEMU program (default "qemu-system-x86_64", found on PATH).
	Binary string
	// Args describe the machine: -machine, -m, drives, NICs, -nographic ...
	Args []string
	// BootArgs are added for a boot target; targets not listed use
	// DefaultBootArgs. Use it to put bootindex= on your own devices.
	BootArgs map[string][]string
	// Grace is how long Shutdown waits for the guest to power off after the
	// ACPI power button before forcing it (default 1 minute).
	Grace time.Duration
	// Stdout and Stderr receive QEMU's output (default: discarded).
	Stdout, Stderr io.Writer
	// Logger gets power events; nil discards.
	Logger *slog.Logger
	// MediaDir holds the copy of the inserted virtual media image, fetched
	// at power-on (default os.TempDir()).
	MediaDir string
	// MediaClient fetches virtual media (default: 5-minute timeout).
	MediaClient *http.Client

	mu    sync.Mutex
	media cdrom // the virtual CD drive
	proc  *os.Process
	done  chan struct{} // closed when the running process exits
	dir   string        // holds the QMP socket of the running process
	last  []string      // arguments of the last start, for tests and logs
}

// DefaultBootArgs picks QEMU's legacy boot order for a Redfish boot target.
var DefaultBootArgs = map[string][]string{
	"Pxe":      {"-boot", "order=nc"},
	"UefiHttp": {"-boot", "order=nc"},
	"Hdd":      {"-boot", "order=cn"},
	"Cd":       {"-boot", "order=dc"},
}

// LastArgs returns the arguments QEMU was last started with.
func (q *QEMU) LastArgs() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.last)
}

// State is "On" while the QEMU process runs.
func (q *QEMU) State() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.proc != nil {
		return "On"
	}
	return "Off"
}

// PowerOn starts QEMU booting from bootTarget; nothing when it already
// runs. An inserted virtual media image is fetched first and attached as a
// CD drive, first in the boot order when bootTarget is "Cd".
func (q *QEMU) PowerOn(ctx context.Context, bootTarget string) error {
	if q.State() == "On" {
		return nil
	}
	cd, image, err := q.fetchMedia(ctx)
	if err != nil {
		return fmt.Errorf("starting QEMU for boot target %q: %w", bootTarget, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.proc != nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "ingot-vbmc-qemu-")
	if err != nil {
		return fmt.Errorf("starting QEMU: %w", err)
	}
	args := slices.Clone(q.Args)
	boot, ok := q.BootArgs[bootTarget]
	if !ok {
		boot = DefaultBootArgs[bootTarget]
	}
	args = append(args, boot...)
	args = append(args, cdArgs(cd, bootTarget == "Cd")...)
	args = append(args, "-qmp", "unix:"+filepath.Join(dir, "qmp.sock")+",server=on,wait=off")
	bin := q.Binary
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = q.Stdout, q.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("starting QEMU (%s) for boot target %q: %w", bin, bootTarget, err)
	}
	done := make(chan struct{})
	q.proc, q.done, q.dir, q.last = cmd.Process, done, dir, append([]string{bin}, args...)
	log := q.logger().With("pid", cmd.Process.Pid, "boot", bootTarget)
	if image != "" {
		log = log.With("cd", image)
	}
	log.Info("qemu powered on")
	go func() {
		err := cmd.Wait()
		q.mu.Lock()
		if q.done == done {
			q.proc, q.done = nil, nil
		}
		q.mu.Unlock()
		os.RemoveAll(dir)
		q.logger().Info("qemu powered off", "pid", cmd.Process.Pid, "exit", err)
		close(done)
	}()
	return nil
}

// PowerOff stops QEMU now: SIGTERM (QEMU exits at once, like pulling the
// plug), then SIGKILL if it is still there after 5 seconds.
func (q *QEMU) PowerOff(ctx context.Context) error {
	proc, done, _ := q.running()
	if proc == nil {
		return nil
	}
	_ = proc.Signal(syscall.SIGTERM)
	if waitDone(ctx, done, 5*time.Second) {
		return nil
	}
	_ = proc.Kill()
	if waitDone(ctx, done, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("powering off QEMU pid %d: still running after SIGKILL", proc.Pid)
}

// Shutdown presses the ACPI power button through QMP (system_powerdown) and
// waits Grace for the guest to power off, then forces it off. A QEMU whose
// QMP socket does not answer is forced off at once.
func (q *QEMU) Shutdown(ctx context.Context) error {
	proc, done, dir := q.running()
	if proc == nil {
		return nil
	}
	if err := qmpCommand(ctx, filepath.Join(dir, "qmp.sock"), "system_powerdown"); err != nil {
		q.logger().Warn("qemu graceful shutdown unavailable, forcing off", "err", err)
		return q.PowerOff(ctx)
	}
	grace := q.Grace
	if grace == 0 {
		grace = time.Minute
	}
	if waitDone(ctx, done, grace) {
		return nil
	}
	q.logger().Warn("qemu guest ignored the power button, forcing off", "grace", grace)
	return q.PowerOff(ctx)
}

func (q *QEMU) running() (*os.Process, chan struct{}, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.proc, q.done, q.dir
}

func (q *QEMU) logger() *slog.Logger {
	if q.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return q.Logger
}

// waitDone waits for done for at most d; false on timeout or ctx done.
func waitDone(ctx context.Context, done chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// qmpCommand runs one QMP command (after the capabilities handshake).
func qmpCommand(ctx context.Context, sock, command string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("QMP %s: %w", command, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	dec := json.NewDecoder(conn)
	var greeting map[string]any
	if err := dec.Decode(&greeting); err != nil {
		return fmt.Errorf("QMP %s: reading greeting: %w", command, err)
	}
	if _, ok := greeting["QMP"]; !ok {
		return fmt.Errorf("QMP %s: greeting %v: expected a QMP object", command, greeting)
	}
	for _, c := range []string{"qmp_capabilities", command} {
		if _, err := fmt.Fprintf(conn, `{"execute":%q}`+"\n", c); err != nil {
			return fmt.Errorf("QMP %s: sending %s: %w", command, c, err)
		}
		if err := qmpReply(dec); err != nil {
			return fmt.Errorf("QMP %s: %s: %w", command, c, err)
		}
	}
	return nil
}

// qmpReply reads until a return or error message, skipping events.
func qmpReply(dec *json.Decoder) error {
	for {
		var m map[string]json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return err
		}
		if _, ok := m["return"]; ok {
			return nil
		}
		if e, ok := m["error"]; ok {
			return errors.New(string(e))
		}
	}
}
