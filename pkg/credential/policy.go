package credential

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// ErrRefused: a reference points where the server's policy does not allow.
var ErrRefused = errors.New("credential reference refused")

// Policy is where a server lets references point: file: only to files
// inside Dir, env: only to variables whose names start with EnvPrefix.
// Anything else is refused with the same message whether or not the file
// or variable exists, so a caller of the API learns nothing about the
// host and cannot make the server read (and send to a BMC of its choice)
// any file it can name.
type Policy struct {
	Dir       string              // e.g. /etc/ingot/bmc; "" refuses every file:
	EnvPrefix string              // e.g. INGOT_BMC_; "" refuses every env:
	Getenv    func(string) string // default os.Getenv
	// Secrets opens a secret ingot keeps sealed in its store (secret:NAME,
	// pkg/secret) for a dial of m's BMC; it refuses an endpoint the secret
	// is not bound to (pkg/fleet keeps the bindings). nil refuses every
	// secret:.
	Secrets func(name string, m *machine.Machine) (string, error)
}

// Check refuses a reference the policy does not allow; it reads nothing.
func (p Policy) Check(ref string) error {
	kind, arg, ok := strings.Cut(ref, ":")
	switch {
	case !ok || arg == "":
		return fmt.Errorf("%w: %q: expected file:PATH or env:VARIABLE", ErrRefused, ref)
	case kind == "file":
		if p.Dir == "" || !filepath.IsAbs(arg) || !within(filepath.Clean(p.Dir), filepath.Clean(arg)) {
			return fmt.Errorf("%w: %q: file references must name a file inside %s (serve --bmc-credentials-dir)", ErrRefused, ref, orNone(p.Dir))
		}
	case kind == "env":
		if p.EnvPrefix == "" || !strings.HasPrefix(arg, p.EnvPrefix) || len(arg) == len(p.EnvPrefix) {
			return fmt.Errorf("%w: %q: environment references must name a variable starting with %s (serve --bmc-credential-env-prefix)", ErrRefused, ref, orNone(p.EnvPrefix))
		}
	case kind == "secret":
		if p.Secrets == nil {
			return fmt.Errorf("%w: %q: this server keeps no secrets (no key file)", ErrRefused, ref)
		}
		if machine.CheckDNSName(arg) != nil {
			return fmt.Errorf("%w: %q: a secret name is lower-case letters, digits, '-' and '.', 1-253 characters", ErrRefused, ref)
		}
	default:
		return fmt.Errorf("%w: %q: expected secret:NAME, file:PATH or env:VARIABLE", ErrRefused, ref)
	}
	return nil
}

// Resolve returns the login for a dial of m's BMC: the one place every
// BMC dial of the server gets its credential (the engine, inspect, the
// inventory refresh, telemetry, evidence, rotation), so the rules about
// where a credential may go hold for all of them. It refuses plain http
// unless m is marked insecure (CheckTransport) and a reference the policy
// does not allow; a secret opens only for an endpoint it is bound to
// (Secrets); a file that resolves (through symlinks) outside Dir is
// refused like any other outside file.
func (p Policy) Resolve(m *machine.Machine) (user, password string, err error) {
	ref := m.BMC.CredentialRef
	if err := CheckTransport(m.BMC); err != nil {
		return "", "", err
	}
	if err := p.Check(ref); err != nil {
		return "", "", err
	}
	kind, arg, _ := strings.Cut(ref, ":")
	if kind == "secret" {
		v, err := p.Secrets(arg, m)
		if err != nil {
			return "", "", fmt.Errorf("credential reference %s: %w", ref, err)
		}
		return parse(ref, v)
	}
	if kind == "file" {
		real, err := filepath.EvalSymlinks(arg)
		dir, derr := filepath.EvalSymlinks(p.Dir)
		if err != nil || derr != nil || !within(dir, real) {
			return "", "", fmt.Errorf("credential reference %s: not a readable file inside %s", ref, p.Dir)
		}
	}
	getenv := p.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return Resolve(ref, getenv)
}

func within(dir, p string) bool { return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") }

func orNone(s string) string {
	if s == "" {
		return "(none configured)"
	}
	return s
}
