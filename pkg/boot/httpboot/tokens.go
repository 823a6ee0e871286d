package httpboot

import (
	"context"
	"net/netip"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// TokenIssuer gives a booting machine its boot credential (pkg/agentauth
// decides who may have one; the API server implements this). from is the
// address the script request came from: a requester whose address is not
// tied to mac must get an error, never a credential.
type TokenIssuer interface {
	IssueBootCredential(ctx context.Context, m *machine.Machine, mac string, from netip.Addr) (string, error)
}
