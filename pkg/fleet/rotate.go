package fleet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// BMCRotator is the part of a BMC session password rotation needs.
type BMCRotator interface {
	// RotatePassword sets the logged-in account's password to newPassword,
	// proves a fresh login with it, and restores the old one if that fails
	// (pkg/bmc.Client.RotatePassword).
	RotatePassword(ctx context.Context, account, newPassword string) error
	Close() error
}

// DialBMCAs opens a session to m's BMC as user with password.
type DialBMCAs func(ctx context.Context, m *machine.Machine, user, password string) (BMCRotator, error)

// Rotation is one machine's password rotation.
type Rotation struct {
	Machine string `json:"machine"`
	Secret  string `json:"secret,omitempty"`
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// pendingKey is the line a secret carries while a rotation is under way:
// the new password, written before the BMC is changed, so that a crash
// between the BMC accepting it and the secret being rewritten loses
// nothing (RotateBMC first finds out which of the two the BMC takes).
const pendingKey = "pending_password"

// RotateBMC gives machine idOrName's BMC account a new random password.
// Only secret: references are rotated (ingot can write them back; a file
// or variable it cannot), only when no other machine shares the secret and
// no job holds the machine. The new password is written to the secret as
// pending first, then set on the BMC (which proves a fresh login with it
// and restores the old one if it fails), and becomes the password only
// then; the old one stays the password until that point, so a failure at
// any step leaves a password that logs in. Every rotation leaves an event.
func (s *Service) RotateBMC(ctx context.Context, idOrName, actor string) (Rotation, error) {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return Rotation{Machine: idOrName}, err
	}
	r := Rotation{Machine: m.Name}
	name, ok := strings.CutPrefix(m.BMC.CredentialRef, "secret:")
	switch {
	case m.BMC.Endpoint == "" || m.BMC.CredentialRef == "":
		return r, invalid("rotating the BMC password of %s: no BMC endpoint or credential reference", m.Name)
	case !ok:
		return r, invalid("rotating the BMC password of %s: its credential is %s; only secret: references are rotated, "+
			"because ingot can write the new password back only into its own store (ingot secret set NAME, then enrol the machine with --bmc-cred secret:NAME)",
			m.Name, strings.SplitN(m.BMC.CredentialRef, ":", 2)[0]+":...")
	}
	r.Secret = name
	if err := s.secretsReady(); err != nil {
		return r, err
	}
	if s.dialAs == nil {
		return r, errors.New("this server dials no BMCs")
	}
	if err := s.busy(ctx, m, "rotating the BMC password of"); err != nil {
		return r, err
	}
	users, err := s.secretUsers(ctx)
	if err != nil {
		return r, err
	}
	if u := users[name]; len(u) > 1 {
		return r, invalid("rotating the BMC password of %s: secret %s is shared by %s; give each machine its own secret before rotating", m.Name, name, strings.Join(u, ", "))
	}
	s.rotMu.Lock()
	defer s.rotMu.Unlock()
	raw, err := s.openSecretFor(ctx, name, m)
	if err != nil {
		return r, fmt.Errorf("rotating the BMC password of %s: %w", m.Name, err)
	}
	cred, err := parseSecretCredential(name, string(raw))
	if err != nil {
		return r, err
	}
	if cred.pending != "" {
		// An earlier rotation stopped between setting the BMC and writing
		// the secret: find out which password the BMC takes.
		if err := s.settlePending(ctx, m, name, &cred, actor); err != nil {
			return r, err
		}
	}
	newPass := newBMCPassword()
	pending := cred
	pending.pending = newPass
	if err := s.SetSecret(ctx, name, []byte(pending.text()), actor); err != nil {
		return r, fmt.Errorf("rotating the BMC password of %s: recording the new password before setting it: %w", m.Name, err)
	}
	fail := func(err error) (Rotation, error) {
		// The BMC kept (or got back) the old password: drop the pending one.
		if werr := s.SetSecret(ctx, name, []byte(cred.text()), actor); werr != nil {
			s.log.Error("rotation failed and clearing the pending password failed; the next rotation settles it", "machine", m.Name, "err", werr)
		}
		r.Message = err.Error()
		s.event(ctx, machine.Event{Machine: m.ID, Kind: "bmc.password", Actor: actor,
			Message: fmt.Sprintf("BMC password rotation failed; the old password stays in use: %v", err)})
		return r, fmt.Errorf("rotating the BMC password of %s: %w", m.Name, err)
	}
	b, err := s.dialAs(ctx, m, cred.user, cred.password)
	if err != nil {
		return fail(fmt.Errorf("logging in with the current password: %w", err))
	}
	err = b.RotatePassword(ctx, "", newPass)
	b.Close()
	if err != nil {
		return fail(err)
	}
	done := cred
	done.password = newPass
	if err := s.SetSecret(ctx, name, []byte(done.text()), actor); err != nil {
		// The BMC has the new password, the secret holds it as pending:
		// the next rotation (or an operator) settles it.
		return r, fmt.Errorf("rotating the BMC password of %s: the BMC took the new password but storing it failed (%w); it is kept as pending in secret %s", m.Name, err, name)
	}
	r.OK, r.Message = true, fmt.Sprintf("new password set on %s for %s, a fresh login with it worked, secret %s updated", m.BMC.Endpoint, cred.user, name)
	s.event(ctx, machine.Event{Machine: m.ID, Kind: "bmc.password", Actor: actor, Message: "BMC password rotated: " + r.Message})
	return r, nil
}

// settlePending makes the password the BMC takes the secret's password:
// the current one if it still logs in, else the pending one. One login
// attempt each at most, so a lockout policy is never approached.
func (s *Service) settlePending(ctx context.Context, m *machine.Machine, name string, cred *bmcCredential, actor string) error {
	try := func(pass string) bool {
		b, err := s.dialAs(ctx, m, cred.user, pass)
		if err != nil {
			return false
		}
		b.Close()
		return true
	}
	settled := *cred
	settled.pending = ""
	switch {
	case try(cred.password):
	case try(cred.pending):
		settled.password = cred.pending
	default:
		return fmt.Errorf("rotating the BMC password of %s: secret %s holds an unfinished rotation and neither its password nor the pending one logs in; check the account on %s",
			m.Name, name, m.BMC.Endpoint)
	}
	if err := s.SetSecret(ctx, name, []byte(settled.text()), actor); err != nil {
		return err
	}
	*cred = settled
	s.event(ctx, machine.Event{Machine: m.ID, Kind: "bmc.password", Actor: actor, Message: "an unfinished BMC password rotation was settled"})
	return nil
}

// RotateBMCs rotates several machines one after another and reports each.
func (s *Service) RotateBMCs(ctx context.Context, ids []string, actor string) []Rotation {
	out := make([]Rotation, 0, len(ids))
	for _, id := range ids {
		r, err := s.RotateBMC(ctx, id, actor)
		if err != nil {
			r.OK, r.Message = false, err.Error()
		}
		out = append(out, r)
	}
	return out
}

// RotationTargets are the machines of recipe (all with all) whose BMC
// credential is a secret: reference, by name.
func (s *Service) RotationTargets(ctx context.Context, recipe string, all bool) ([]string, error) {
	if recipe == "" && !all {
		return nil, invalid("rotating BMC passwords: name machines, a recipe or all")
	}
	ms, err := s.store.ListMachines(ctx, store.MachineFilter{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if strings.HasPrefix(m.BMC.CredentialRef, "secret:") && (all || m.Recipe == recipe) {
			out = append(out, m.Name)
		}
	}
	return out, nil
}

// RunRotation rotates, every hour, the BMC password of each machine whose
// secret is older than every (serve --bmc-rotate-every; 0 never). A
// machine in a job is skipped until the next round.
func (s *Service) RunRotation(ctx context.Context, every time.Duration) error {
	if every <= 0 || s.sec == nil {
		<-ctx.Done()
		return nil
	}
	for {
		wait := s.rotateDue(ctx, every)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// rotateDue rotates every secret used by one machine whose age reached
// every, and says how long until the next one is due (at most an hour, at
// least a second): a secret rotated just after a round is rotated at its
// own time, not a round later.
func (s *Service) rotateDue(ctx context.Context, every time.Duration) time.Duration {
	infos, err := s.Secrets(ctx)
	if err != nil {
		s.log.Warn("scheduled BMC rotation: listing secrets", "err", err)
		return min(time.Hour, every)
	}
	next := min(time.Hour, every)
	for _, in := range infos {
		if len(in.UsedBy) != 1 {
			continue
		}
		if age := s.now().Sub(in.Updated); age < every {
			next = min(next, every-age)
			continue
		}
		if m, err := s.store.GetMachine(ctx, in.UsedBy[0]); s.mine != nil && (err != nil || !s.mine(m.ID)) {
			continue // another instance rotates it (Config.Mine)
		}
		if _, err := s.RotateBMC(ctx, in.UsedBy[0], "schedule"); err != nil && !errors.Is(err, ErrBusy) {
			s.log.Warn("scheduled BMC rotation failed", "machine", in.UsedBy[0], "err", err)
		}
	}
	return max(next, time.Second)
}

// bmcCredential is a secret holding a BMC login.
type bmcCredential struct {
	user, password, pending string
	other                   []string // other lines, kept as they are
}

func parseSecretCredential(name, text string) (bmcCredential, error) {
	var c bmcCredential
	user, pass, err := credential.Parse("secret:"+name, text)
	if err != nil {
		return c, err
	}
	c.user, c.password = user, pass
	for _, line := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "username", "user", "password", "":
		case pendingKey:
			c.pending = v
		default:
			if !strings.Contains(line, ":") || strings.Contains(line, "=") {
				c.other = append(c.other, strings.TrimSpace(line))
			}
		}
	}
	return c, nil
}

func (c bmcCredential) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "username=%s\npassword=%s\n", c.user, c.password)
	if c.pending != "" {
		fmt.Fprintf(&b, "%s=%s\n", pendingKey, c.pending)
	}
	for _, l := range c.other {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// newBMCPassword is 20 random characters with an upper-case letter, a
// lower-case letter, a digit and a symbol BMC password policies accept.
func newBMCPassword() string {
	const (
		upper = "ABCDEFGHJKLMNPQRSTUVWXYZ"
		lower = "abcdefghijkmnopqrstuvwxyz"
		digit = "23456789"
		sym   = "-_.+"
		all   = upper + lower + digit
	)
	pick := func(set string) byte {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		return set[n.Int64()]
	}
	b := []byte{pick(upper), pick(lower), pick(digit), pick(sym)}
	for len(b) < 20 {
		b = append(b, pick(all))
	}
	for i := len(b) - 1; i > 0; i-- { // shuffle: the classes' positions are not fixed
		j, _ := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		b[i], b[j.Int64()] = b[j.Int64()], b[i]
	}
	return string(b)
}
