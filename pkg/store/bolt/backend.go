package bolt

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Backend is the bbolt backend for store.Registry: bolt:///path/to/ingot.db
// (three slashes: a bbolt file is local), or a plain path.
func Backend() store.Backend {
	return store.Backend{
		Scheme:  "bolt",
		Example: "bolt:///var/lib/ingot/ingot.db",
		Open: func(_ context.Context, u *url.URL, opts store.Options) (store.Store, error) {
			path, err := filePath(u)
			if err != nil {
				return nil, fmt.Errorf("opening store %s: %w", u.Redacted(), err)
			}
			s, err := Open(path, opts)
			if err != nil {
				return nil, err // Open names the path
			}
			return s, nil
		},
		Restore: func(_ context.Context, u *url.URL, src io.Reader, opts store.Options) (string, error) {
			path, err := filePath(u)
			if err != nil {
				return "", fmt.Errorf("restoring store %s: %w", u.Redacted(), err)
			}
			return Restore(path, src, opts)
		},
	}
}

// filePath is the bbolt file u names, or why it names none.
func filePath(u *url.URL) (string, error) {
	switch {
	case u.Opaque != "":
		return "", fmt.Errorf("bolt URL %q is not a path: write bolt:///path/to/ingot.db", u.String())
	case u.Host != "" && u.Host != "localhost":
		return "", fmt.Errorf("bolt URL names host %q, but a bbolt file is local: write bolt:///absolute/path (three slashes) or a plain path", u.Host)
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("bolt URL has a query or fragment; options go in the configuration, not the URL")
	case u.User != nil:
		return "", fmt.Errorf("bolt URL has user information; a bbolt file takes none")
	case u.Path == "" || u.Path == "/":
		return "", fmt.Errorf("bolt URL names no file: write bolt:///path/to/ingot.db")
	}
	return u.Path, nil
}

// Location is the store's URL, for logs.
func (b *Store) Location() string {
	return (&url.URL{Scheme: "bolt", Path: b.path}).String()
}

// Stats are the lease log's counters (every DHCP ACK waits for a round of
// it, so its write latency is the ACK's floor): rate(..._write_seconds_total)
// / rate(..._rounds_total) is the mean round latency.
func (b *Store) Stats() []store.Stat {
	s := b.LeaseLogStats()
	return []store.Stat{
		{Name: "lease_log_rounds_total", Help: "Lease log rounds written (one fdatasync each, shared by concurrent DHCP ACKs).", Value: float64(s.Rounds), Counter: true},
		{Name: "lease_log_mutations_total", Help: "Lease mutations written to the lease log.", Value: float64(s.Mutations), Counter: true},
		{Name: "lease_log_write_errors_total", Help: "Lease log rounds whose write or fdatasync failed (their ACKs were not sent).", Value: float64(s.WriteErrors), Counter: true},
		{Name: "lease_log_write_seconds_total", Help: "Time spent writing and syncing lease log rounds.", Value: s.WriteSeconds, Counter: true},
		{Name: "lease_log_applies_total", Help: "Lease log segments applied to the database.", Value: float64(s.Applies), Counter: true},
		{Name: "lease_log_apply_errors_total", Help: "Failed applies of the lease log to the database (retried).", Value: float64(s.ApplyErrors), Counter: true},
		{Name: "lease_log_apply_seconds_total", Help: "Time spent applying the lease log to the database.", Value: s.ApplySeconds, Counter: true},
		{Name: "lease_log_pending", Help: "Lease mutations durable in the log, not yet applied to the database.", Value: float64(s.Pending)},
	}
}
