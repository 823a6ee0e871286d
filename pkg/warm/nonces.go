package warm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// NoncePath is where the service keeps the nonces it has taken.
//
// Why a file and not the boot ID with a counter: a signed request is good
// for MaxAge, and the one thing that stops it a second time is the node
// remembering its nonce for that long. Binding requests to the node's boot
// ID and a counter would need the server to learn both before it signs (a
// round trip and a protocol change on every caller of Sign and Trigger),
// and the counter would still have to survive a restart of the service,
// which is a file again. The file holds a handful of entries (each is
// dropped once its request has expired), is rewritten whole through
// pkg/durable before the service answers 202, and a request whose nonce
// cannot be recorded is refused: a restart, a crash or a power cut after
// the 202 finds the nonce there.
const NoncePath = "/var/lib/ingot/warm-nonces.json"

// nonces is the set of nonces taken, each until its request expires,
// mirrored in a file. Not safe for concurrent use (the Service locks).
type nonces struct {
	path string
	seen map[string]time.Time
}

// loadNonces reads path (a missing file is an empty set); a damaged file
// is an error naming it: the service does not start rather than forget.
func loadNonces(path string) (*nonces, error) {
	n := &nonces{path: path, seen: map[string]time.Time{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return n, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the warm reimage nonces: %w", err)
	}
	if err := json.Unmarshal(b, &n.seen); err != nil {
		return nil, fmt.Errorf("warm reimage nonces %s: %v (expected a JSON object of nonce: expiry; remove the file after %s have passed)", path, err, MaxAge+time.Minute)
	}
	if n.seen == nil {
		n.seen = map[string]time.Time{}
	}
	return n, nil
}

// take records nonce until its request expires, after dropping the
// expired ones. It reports false when the nonce was taken before, and an
// error (the nonce not taken) when the file cannot be written.
func (n *nonces) take(nonce string, until, now time.Time) (bool, error) {
	for k, u := range n.seen {
		if now.After(u) {
			delete(n.seen, k)
		}
	}
	if _, ok := n.seen[nonce]; ok {
		return false, nil
	}
	n.seen[nonce] = until
	b, _ := json.Marshal(n.seen)
	err := os.MkdirAll(filepath.Dir(n.path), 0o700)
	if err == nil {
		err = durable.WriteFile(n.path, b, 0o600)
	}
	if err != nil {
		delete(n.seen, nonce)
		return false, fmt.Errorf("recording the request's nonce: %w", err)
	}
	return true, nil
}
