package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Where a sealed secret may go. A secret records the BMC endpoints it is
// for (store.Secret.Endpoints, as origins: credential.Origin). It is bound
// by `ingot secret set --endpoint URL`, or, when set without one, at its
// first use: the first dial with it binds it to the endpoints of the
// machines enrolled with it by then, with an event on each. From then on it opens only for a dial
// of a bound endpoint; sending it anywhere else needs `ingot secret allow
// NAME --endpoint URL` (AllowSecret), an event on the machines it concerns.
// So an operator who enrols a machine of their own with secret:NAME and a
// BMC endpoint they listen on learns nothing: the dial is refused before a
// byte is sent, and the refusal is a security event on that machine.

// maxSecretEndpoints bounds one secret's bindings (a rack's shared default
// BMC password has one per BMC).
const maxSecretEndpoints = 4096

// openSecretFor opens secret name for a dial of m's BMC: only over a
// transport credential.CheckTransport allows, and only to an endpoint the
// secret is bound to (an unbound secret is bound to m's at this first
// use). A refusal is a security event on m and wraps credential.ErrRefused.
func (s *Service) openSecretFor(ctx context.Context, name string, m *machine.Machine) ([]byte, error) {
	if err := s.secretsReady(); err != nil {
		return nil, err
	}
	if err := credential.CheckTransport(m.BMC); err != nil {
		return nil, err
	}
	origin, err := credential.Origin(m.BMC.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", credential.ErrRefused, err)
	}
	if err := s.bindAtFirstUse(ctx, name, origin, m); err != nil {
		return nil, err
	}
	return s.openChecked(ctx, name, func(rec *store.Secret) error {
		if !rec.BoundTo(origin) {
			return s.refuseSecret(ctx, rec, origin, m)
		}
		return nil
	})
}

// refuseSecret records a dial the secret's bindings refused, as a security
// event on m (repeats coalesce: telemetry retries every poll), and returns
// the error for the caller.
func (s *Service) refuseSecret(ctx context.Context, rec *store.Secret, origin string, m *machine.Machine) error {
	var to []string
	for _, b := range rec.Endpoints {
		to = append(to, b.Endpoint)
	}
	msg := fmt.Sprintf("refused to send secret %s to %s (the BMC endpoint of %s): it is bound to %s", rec.Name, origin, m.Name, strings.Join(to, ", "))
	s.log.Warn("security: "+msg, "machine", m.Name, "secret", rec.Name, "endpoint", origin)
	s.event(ctx, machine.Event{Machine: m.ID, Kind: "security", Actor: "fleet", Message: msg,
		Fields: map[string]string{"secret": rec.Name, "endpoint": origin}})
	return fmt.Errorf("%w: %s; if that BMC is the secret's, allow it with 'ingot secret allow %s --endpoint %s' (an event on every machine using it)",
		credential.ErrRefused, msg, rec.Name, origin)
}

// bindAtFirstUse binds an unbound secret, at its first use (a dial of
// m's BMC), to the endpoints of every machine using it then: m's and those
// of the machines enrolled with it so far (a rack's shared BMC password,
// or every secret of a store written before bindings existed, keeps
// working for all of them), with an event on each. A machine enrolled
// with it later needs 'ingot secret allow'. A bound secret is left as it
// is. Two first uses racing (another server on the same store) bind once:
// the write is conditional on the record read (ReplaceSecrets).
func (s *Service) bindAtFirstUse(ctx context.Context, name, origin string, m *machine.Machine) error {
	rec, err := s.sec.store.GetSecret(ctx, name)
	if err != nil || len(rec.Endpoints) > 0 {
		return err
	}
	s.sec.mu.Lock()
	defer s.sec.mu.Unlock()
	rec, err = s.sec.store.GetSecret(ctx, name)
	if err != nil || len(rec.Endpoints) > 0 {
		return err
	}
	users, err := s.secretEndpoints(ctx, name)
	if err != nil {
		return fmt.Errorf("binding secret %s at its first use: %w", name, err)
	}
	at := s.now().UTC()
	rec.Endpoints = []store.SecretBinding{{Endpoint: origin, By: "first use by " + m.Name, At: at}}
	for _, u := range users {
		if !rec.BoundTo(u.origin) && len(rec.Endpoints) < maxSecretEndpoints {
			rec.Endpoints = append(rec.Endpoints, store.SecretBinding{Endpoint: u.origin, By: "used by " + u.m.Name + " at the first use", At: at})
		}
	}
	if err := s.sec.store.ReplaceSecrets(ctx, []store.Secret{*rec}); errors.Is(err, store.ErrStale) {
		return nil // bound meanwhile: openSecretFor checks the winner's binding
	} else if err != nil {
		return fmt.Errorf("binding secret %s at its first use: %w", name, err)
	}
	s.log.Info("secret bound at its first use", "secret", name, "machine", m.Name, "endpoints", len(rec.Endpoints))
	for _, u := range users {
		if rec.BoundTo(u.origin) {
			s.event(ctx, machine.Event{Machine: u.m.ID, Kind: "secret", Actor: "fleet",
				Message: fmt.Sprintf("secret %s bound to %s (this machine's BMC) at its first use, by %s: it is sent nowhere it is not bound to unless an operator allows it (ingot secret allow)", name, u.origin, m.Name),
				Fields:  map[string]string{"secret": name, "endpoint": u.origin}})
		}
	}
	return nil
}

// secretUser is a machine whose BMC credential is a secret, and its BMC's
// origin.
type secretUser struct {
	m      machine.Machine
	origin string
}

// secretEndpoints lists the machines whose credential is secret:name and
// whose BMC endpoint is an http(s) URL.
func (s *Service) secretEndpoints(ctx context.Context, name string) ([]secretUser, error) {
	ms, err := s.store.ListMachines(ctx, store.MachineFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	var out []secretUser
	for _, m := range ms {
		if o, err := credential.Origin(m.BMC.Endpoint); err == nil && m.BMC.CredentialRef == "secret:"+name {
			out = append(out, secretUser{m, o})
		}
	}
	return out, nil
}

// AllowSecret lets secret name also go to endpoint: the explicit operator
// action sending a bound secret anywhere new needs. It is an event on every
// machine using the secret at that endpoint, and the binding keeps actor
// and time (secret ls shows them). Allowing a bound endpoint again changes
// nothing. A secret not bound yet is first bound to the machines using it
// (what its first use would do): "also" keeps its meaning.
func (s *Service) AllowSecret(ctx context.Context, name, endpoint, actor string) error {
	if err := s.secretsReady(); err != nil {
		return err
	}
	add, err := s.bindings([]string{endpoint}, actor)
	if err != nil {
		return fmt.Errorf("allowing secret %s: %w", name, err)
	}
	s.sec.mu.Lock()
	defer s.sec.mu.Unlock()
	rec, err := s.sec.store.GetSecret(ctx, name)
	if err != nil {
		return fmt.Errorf("allowing secret %s: %w", name, err)
	}
	if rec.BoundTo(add[0].Endpoint) {
		return nil
	}
	if len(rec.Endpoints) == 0 {
		users, err := s.secretEndpoints(ctx, name)
		if err != nil {
			return fmt.Errorf("allowing secret %s: %w", name, err)
		}
		for _, u := range users {
			if !rec.BoundTo(u.origin) && u.origin != add[0].Endpoint {
				rec.Endpoints = append(rec.Endpoints, store.SecretBinding{Endpoint: u.origin, By: "used by " + u.m.Name + " when first allowed", At: add[0].At})
			}
		}
	}
	if len(rec.Endpoints) >= maxSecretEndpoints {
		return invalid("allowing secret %s: it is bound to %d endpoints already (at most %d)", name, len(rec.Endpoints), maxSecretEndpoints)
	}
	rec.Endpoints = append(rec.Endpoints, add[0])
	if err := s.sec.store.ReplaceSecrets(ctx, []store.Secret{*rec}); err != nil {
		return fmt.Errorf("allowing secret %s to go to %s: %w", name, add[0].Endpoint, err)
	}
	s.log.Info("secret allowed to a new endpoint", "secret", name, "endpoint", add[0].Endpoint, "actor", actor)
	s.bindingEvents(ctx, name, add, actor, "allowed")
	return nil
}

// bindings turns endpoints into bindings by actor now, each an origin,
// refusing a malformed one and duplicates.
func (s *Service) bindings(endpoints []string, actor string) ([]store.SecretBinding, error) {
	if len(endpoints) > maxSecretEndpoints {
		return nil, invalid("%d endpoints; at most %d", len(endpoints), maxSecretEndpoints)
	}
	var out []store.SecretBinding
	seen := map[string]bool{}
	for _, e := range endpoints {
		o, err := credential.Origin(e)
		if err != nil {
			return nil, invalid("%v", err)
		}
		if !seen[o] {
			seen[o] = true
			out = append(out, store.SecretBinding{Endpoint: o, By: actor, At: s.now().UTC()})
		}
	}
	return out, nil
}

// bindingEvents records, on every machine whose BMC credential is
// secret:name at one of bound's endpoints, that an operator let the secret
// go there.
func (s *Service) bindingEvents(ctx context.Context, name string, bound []store.SecretBinding, actor, what string) {
	users, err := s.secretEndpoints(ctx, name)
	if err != nil {
		s.log.Error("recording a secret's binding on its machines", "secret", name, "err", err)
		return
	}
	for _, u := range users {
		for _, b := range bound {
			if b.Endpoint == u.origin {
				s.event(ctx, machine.Event{Machine: u.m.ID, Kind: "secret", Actor: actor,
					Message: fmt.Sprintf("secret %s %s to go to %s (this machine's BMC) by %s", name, what, u.origin, actor),
					Fields:  map[string]string{"secret": name, "endpoint": u.origin}})
			}
		}
	}
}
