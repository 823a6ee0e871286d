// Package agentauth decides who may speak for a machine. Nobody but the
// machine itself gets a credential for it, and a credential works only from
// the machine's address and only for the job it was issued in.
//
// # Credentials
//
//   - A boot credential is written into the iPXE script (or handed to an
//     agent that asks for it itself, for UEFI HTTP boot and virtual media).
//     It is issued only to a requester whose address is tied to the machine's
//     MAC (see Binding) and is good for one thing: the exchange. A new boot
//     of the job (the machine fetches its script again, or the engine's BMC
//     step reboots it) deletes every earlier credential of the job.
//   - The agent exchanges it on its first call for an agent credential,
//     bound to the address it came from. The exchange is idempotent from the
//     same address (the agent's retries are not an attack: each exchange
//     replaces the agent credential it gave before); an exchange or a use
//     from any other address is refused and recorded as a security event on
//     the machine.
//   - A first-boot credential is given to the agent with its task, written
//     into the installed system, and presented by the installed OS's
//     first-boot report, from an address tied to the machine.
//
// Every credential of a job is deleted (not only revoked) when the job ends.
// Only SHA-256 hashes of secrets are stored.
//
// What this does not stop: a host on the boot network that can spoof both
// the machine's IP and MAC address. Keep the boot network separate.
package agentauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Binding is how a request's address is tied to a machine's MAC.
type Binding string

// The bindings.
const (
	// BindLease: ingot's DHCP (full mode, relayed too) leased the address to
	// the MAC, and the lease has not expired.
	BindLease Binding = "lease"
	// BindNeighbour: the boot interface's neighbour (ARP) entry for the
	// address has the MAC (proxy DHCP mode, or ingot's DHCP off).
	BindNeighbour Binding = "neighbour"
	// BindFirstUse: the first address that asks during a boot attempt is
	// bound (sites that boot across routers without ingot's DHCP). Anyone
	// who asks before the machine does gets its credential: opt in only
	// where the boot network is trusted.
	BindFirstUse Binding = "first-use"
)

// Kinds of machine credentials (store.Token.Kind).
const (
	KindBoot      = "boot"
	KindAgent     = "agent"
	KindFirstBoot = "firstboot"
)

// ScopePrefix starts the scope of every machine credential.
const ScopePrefix = "machine:"

// Sentinel errors; the API maps them to 403 (ErrNotTied, ErrForeign,
// ErrWrongKind) and 401 (ErrUnknown).
var (
	ErrNotTied   = errors.New("the requester's address is not tied to the machine")
	ErrForeign   = errors.New("credential used from an address it is not bound to")
	ErrUnknown   = errors.New("unknown, expired or deleted credential")
	ErrWrongKind = errors.New("credential of the wrong kind for this request")
)

// Store is the part of the store the credentials live in.
type Store interface {
	LeaseByMAC(ctx context.Context, mac string) (*store.Lease, error)
	GetMachine(ctx context.Context, idOrName string) (*machine.Machine, error)
	GetJob(ctx context.Context, id string) (*store.Job, error)
	PutToken(ctx context.Context, t store.Token) error
	TokenByHash(ctx context.Context, hash string) (*store.Token, error)
	FindTokens(ctx context.Context, f store.TokenFilter) ([]store.Token, error)
	DeleteToken(ctx context.Context, hash string) error
}

// Neighbour is one entry of the boot interface's neighbour table.
type Neighbour struct {
	IP  netip.Addr
	MAC string // normalized
}

// Config builds an Auth.
type Config struct {
	Store Store
	// Record keeps security events on the machine's log (the fleet's
	// Record); nil: they are only logged.
	Record  func(ctx context.Context, ev machine.Event)
	Binding Binding // default BindLease
	// Neighbours lists the boot interface's neighbour table (BindNeighbour);
	// see ReadARP.
	Neighbours func(ctx context.Context) ([]Neighbour, error)
	// DiscoveryTTL bounds credentials issued with no job (default 1h).
	DiscoveryTTL time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
}

// Auth issues and checks machine credentials.
type Auth struct {
	cfg Config
	log *slog.Logger
	now func() time.Time
}

// New checks cfg and builds an Auth.
func New(cfg Config) (*Auth, error) {
	if cfg.Store == nil {
		return nil, errors.New("agentauth: Store is required")
	}
	switch cfg.Binding {
	case "":
		cfg.Binding = BindLease
	case BindLease, BindFirstUse:
	case BindNeighbour:
		if cfg.Neighbours == nil {
			return nil, errors.New("agentauth: neighbour binding needs a neighbour table")
		}
	default:
		return nil, fmt.Errorf("agentauth: binding %q: expected %s, %s or %s", cfg.Binding, BindLease, BindNeighbour, BindFirstUse)
	}
	if cfg.DiscoveryTTL <= 0 {
		cfg.DiscoveryTTL = time.Hour
	}
	a := &Auth{cfg: cfg, log: cfg.Logger, now: cfg.Now}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// Binding returns the binding in force.
func (a *Auth) Binding() Binding { return a.cfg.Binding }

// Hash returns the hex SHA-256 under which a secret is stored.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func newSecret(prefix string) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}
