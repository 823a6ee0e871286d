// Package sdnotify tells systemd about the service's state: the sd_notify
// protocol (sd_notify(3)) spoken directly over the datagram socket named by
// $NOTIFY_SOCKET, without libsystemd. A unit with Type=notify is "active"
// only once READY=1 arrives; RELOADING=1 (with MONOTONIC_USEC, as systemd
// 253's Type=notify-reload requires) and STOPPING=1 mark reloads and
// shutdown; STATUS= is the one-line status `systemctl status` shows.
//
// Outside systemd ($NOTIFY_SOCKET unset) New returns nil and every method of
// a nil *Notifier does nothing, so callers need no "am I under systemd?"
// branches.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Notifier sends state changes to systemd's notification socket.
type Notifier struct {
	addr *net.UnixAddr
	// Monotonic is CLOCK_MONOTONIC, the clock MONOTONIC_USEC is read from
	// (replaced in tests).
	Monotonic func() (time.Duration, error)
}

// New returns a Notifier for $NOTIFY_SOCKET as getenv reads it, or nil when
// it is unset (not started by systemd, or by a unit that is not
// Type=notify). A leading '@' names a socket in the abstract namespace.
func New(getenv func(string) string) (*Notifier, error) {
	path := getenv("NOTIFY_SOCKET")
	switch {
	case path == "":
		return nil, nil
	case path[0] != '/' && path[0] != '@':
		// systemd also accepts vsock:CID:PORT (VMs); ingot is never run so.
		return nil, fmt.Errorf("NOTIFY_SOCKET=%q: expected an absolute path or @abstract name", path)
	}
	return &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}, Monotonic: monotonic}, nil
}

// Notify sends one message made of state assignments ("READY=1",
// "STATUS=..."), one per line. A nil Notifier sends nothing.
func (n *Notifier) Notify(state ...string) error {
	if n == nil {
		return nil
	}
	for _, s := range state {
		if !strings.Contains(s, "=") || strings.Contains(s, "\n") {
			return fmt.Errorf("sd_notify: %q: expected one VARIABLE=value without a newline", s)
		}
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: connecting to %s: %w", n.addr.Name, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(strings.Join(state, "\n"))); err != nil {
		return fmt.Errorf("sd_notify: sending to %s: %w", n.addr.Name, err)
	}
	return nil
}

// Ready says start-up (or a reload) has finished: every listener is bound.
// status, when not empty, becomes the service's status line too.
func (n *Notifier) Ready(status string) error {
	if status == "" {
		return n.Notify("READY=1")
	}
	return n.Notify("READY=1", "STATUS="+oneLine(status))
}

// Reloading says a reload has begun; send Ready when it is done.
func (n *Notifier) Reloading() error {
	if n == nil {
		return nil
	}
	now, err := n.Monotonic()
	if err != nil {
		return fmt.Errorf("sd_notify: reading CLOCK_MONOTONIC: %w", err)
	}
	return n.Notify("RELOADING=1", "MONOTONIC_USEC="+strconv.FormatInt(now.Microseconds(), 10))
}

// Stopping says shutdown has begun (the drain may take a while).
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Status sets the one-line status `systemctl status` shows.
func (n *Notifier) Status(status string) error { return n.Notify("STATUS=" + oneLine(status)) }

// oneLine replaces line breaks, which would end the assignment early.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// monotonic reads CLOCK_MONOTONIC, the clock systemd compares
// MONOTONIC_USEC with.
func monotonic() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	if ts.Sec < 0 {
		return 0, errors.New("negative CLOCK_MONOTONIC")
	}
	return time.Duration(ts.Nano()), nil
}
