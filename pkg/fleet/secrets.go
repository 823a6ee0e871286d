package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/secret"
	"github.com/ingot-dev/ingot/pkg/store"
)

// ErrNoSecrets: the server was started without a secret store or key file.
var ErrNoSecrets = errors.New("this server keeps no secrets")

// maxSecretSize bounds one secret's value: credentials, not files.
const maxSecretSize = 8 << 10

// SecretInfo is what the API tells about a secret: never its value.
type SecretInfo struct {
	Name    string    `json:"name"`
	KeyID   string    `json:"key_id"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// UsedBy lists the machines whose BMC credential is secret:Name.
	UsedBy []string `json:"used_by"`
	// Endpoints are where the secret may be sent (none: it is bound at
	// its first use), each with who bound it when.
	Endpoints []store.SecretBinding `json:"endpoints"`
}

// secrets is the sealed-secret part of the Service: the store's secrets
// and the key file they are sealed with; rotation of the key holds mu.
type secrets struct {
	store store.SecretStore
	keys  *secret.Keyring
	mu    sync.RWMutex
}

func (s *Service) secretsReady() error {
	if s.sec == nil {
		return fmt.Errorf("%w: start serve with a secret key file (--secret-key-file)", ErrNoSecrets)
	}
	return nil
}

// SetSecret seals value under name (creating or replacing it), keeping
// the endpoints a replaced secret is bound to; a new one is bound at its
// first use.
func (s *Service) SetSecret(ctx context.Context, name string, value []byte, actor string) error {
	return s.setSecret(ctx, name, value, nil, actor)
}

// SetSecretBound is SetSecret that binds the secret to exactly endpoints
// (replacing earlier bindings: the new value goes nowhere else), with an
// event on each machine using it at one of them.
func (s *Service) SetSecretBound(ctx context.Context, name string, value []byte, endpoints []string, actor string) error {
	if len(endpoints) == 0 {
		return invalid("secret %s: no endpoint to bind it to", name)
	}
	return s.setSecret(ctx, name, value, endpoints, actor)
}

func (s *Service) setSecret(ctx context.Context, name string, value []byte, endpoints []string, actor string) error {
	if err := s.secretsReady(); err != nil {
		return err
	}
	if err := CheckName(name); err != nil {
		return fmt.Errorf("secret name: %w", err)
	}
	if len(value) == 0 || len(value) > maxSecretSize {
		return invalid("secret %s: value of %d bytes; expected 1 to %d", name, len(value), maxSecretSize)
	}
	bound, err := s.bindings(endpoints, actor)
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	s.sec.mu.Lock()
	defer s.sec.mu.Unlock()
	if endpoints == nil {
		old, err := s.sec.store.GetSecret(ctx, name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if old != nil {
			bound = old.Endpoints
		}
	}
	id, sealed, err := s.sec.keys.Seal(name, value)
	if err != nil {
		return fmt.Errorf("sealing secret %s: %w", name, err)
	}
	if err := s.sec.store.PutSecret(ctx, store.Secret{Name: name, KeyID: id, Sealed: sealed, Endpoints: bound}); err != nil {
		return err
	}
	s.log.Info("secret set", "secret", name, "key", id, "actor", actor, "endpoints", len(bound))
	if endpoints != nil {
		s.bindingEvents(ctx, name, bound, actor, "set and bound")
	}
	return nil
}

// openChecked returns the value of the secret name once check accepts its
// record, read under the key's read lock (key rotation waits).
func (s *Service) openChecked(ctx context.Context, name string, check func(*store.Secret) error) ([]byte, error) {
	s.sec.mu.RLock()
	defer s.sec.mu.RUnlock()
	rec, err := s.sec.store.GetSecret(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := check(rec); err != nil {
		return nil, err
	}
	return s.sec.keys.Open(name, rec.KeyID, rec.Sealed)
}

// Secrets lists every secret with the machines that use it.
func (s *Service) Secrets(ctx context.Context) ([]SecretInfo, error) {
	if err := s.secretsReady(); err != nil {
		return nil, err
	}
	recs, err := s.sec.store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	users, err := s.secretUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SecretInfo, 0, len(recs))
	for _, r := range recs {
		out = append(out, SecretInfo{Name: r.Name, KeyID: r.KeyID, Created: r.Created, Updated: r.Updated, UsedBy: nonNil(users[r.Name]),
			Endpoints: append([]store.SecretBinding{}, r.Endpoints...)})
	}
	slices.SortFunc(out, func(a, b SecretInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteSecret removes a secret no machine uses; one in use is refused
// with the machines named.
func (s *Service) DeleteSecret(ctx context.Context, name, actor string) error {
	if err := s.secretsReady(); err != nil {
		return err
	}
	users, err := s.secretUsers(ctx)
	if err != nil {
		return err
	}
	if u := users[name]; len(u) > 0 {
		return fmt.Errorf("deleting secret %s: %w: the BMC credential of %s; enrol them with another reference first", name, store.ErrConflict, strings.Join(u, ", "))
	}
	if err := s.sec.store.DeleteSecret(ctx, name); err != nil {
		return err
	}
	s.log.Info("secret deleted", "secret", name, "actor", actor)
	return nil
}

// RotateSecretKey seals every secret again under a fresh key and then
// drops the old key from the key file. A crash at any step leaves every
// secret openable: the new key is written to the file before anything is
// sealed with it, all secrets are re-sealed in one store write, and the
// old key is dropped only after that write.
func (s *Service) RotateSecretKey(ctx context.Context, actor string) (keyID string, resealed int, err error) {
	if err := s.secretsReady(); err != nil {
		return "", 0, err
	}
	s.sec.mu.Lock()
	defer s.sec.mu.Unlock()
	recs, err := s.sec.store.ListSecrets(ctx)
	if err != nil {
		return "", 0, err
	}
	if err := s.sec.keys.BeginRotation(); err != nil {
		return "", 0, err
	}
	for i, r := range recs {
		v, err := s.sec.keys.Open(r.Name, r.KeyID, r.Sealed)
		if err != nil {
			return "", 0, fmt.Errorf("rotating the secret key: %w (nothing was re-sealed; the key file keeps every key)", err)
		}
		if recs[i].KeyID, recs[i].Sealed, err = s.sec.keys.Seal(r.Name, v); err != nil {
			return "", 0, err
		}
	}
	if len(recs) > 0 {
		if err := s.sec.store.ReplaceSecrets(ctx, recs); err != nil {
			return "", 0, fmt.Errorf("rotating the secret key: %w (nothing was re-sealed; the key file keeps every key)", err)
		}
	}
	if err := s.sec.keys.FinishRotation(); err != nil {
		return "", 0, fmt.Errorf("rotating the secret key: every secret is sealed with key %s, but dropping the old keys failed: %w", s.sec.keys.Current(), err)
	}
	s.log.Info("secret key rotated", "key", s.sec.keys.Current(), "resealed", len(recs), "actor", actor)
	return s.sec.keys.Current(), len(recs), nil
}

// secretUsers maps a secret's name to the machines referencing it.
func (s *Service) secretUsers(ctx context.Context) (map[string][]string, error) {
	ms, err := s.store.ListMachines(ctx, store.MachineFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	out := map[string][]string{}
	for _, m := range ms {
		if name, ok := strings.CutPrefix(m.BMC.CredentialRef, "secret:"); ok {
			out[name] = append(out[name], m.Name)
		}
	}
	return out, nil
}

// Credentials is the server's credential policy with this service's
// secrets behind secret: references: what every BMC dial of the server
// resolves its login with (Policy.Resolve), so a secret opens only for an
// endpoint it is bound to (openSecretFor).
func (s *Service) Credentials() credential.Policy {
	p := s.creds
	if s.sec != nil {
		p.Secrets = func(name string, m *machine.Machine) (string, error) {
			v, err := s.openSecretFor(context.Background(), name, m)
			return string(v), err
		}
	}
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Backup writes a consistent copy of the store to w while the server runs
// (store.Maintainer). Before the first byte it calls header with the ID
// of the secret key the copy's sealed secrets need ("" without secrets):
// the key itself is never in a backup. Key rotation waits meanwhile.
func (s *Service) Backup(ctx context.Context, w io.Writer, header func(keyID string)) (int64, error) {
	s.lockKey()
	defer s.unlockKey()
	header(s.keyIDLocked())
	return s.store.Backup(ctx, w)
}

// lockKey holds key rotation still (a backup's secrets then match the key
// ID it reports).
func (s *Service) lockKey() {
	if s.sec != nil {
		s.sec.mu.RLock()
	}
}

func (s *Service) unlockKey() {
	if s.sec != nil {
		s.sec.mu.RUnlock()
	}
}

func (s *Service) keyIDLocked() string {
	if s.sec == nil {
		return ""
	}
	return s.sec.keys.Current()
}
