package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// apiTLS is the API listener's certificate: the operator's (--tls-cert,
// --tls-key) or one from ingot's own CA in DATA/tls naming hosts.
type apiTLS struct {
	holder *tlsca.Holder
	// fingerprint is what machines pin: the top of the served chain.
	fingerprint string
	top         *x509.Certificate // served as /api/v1/ca.pem
}

// newAPITLS loads or makes the certificate.
func newAPITLS(cfg Config, hosts []string) (*apiTLS, error) {
	load := func() (*tls.Certificate, error) {
		c, _, err := tlsca.Ensure(filepath.Join(cfg.Data, "tls"), hosts, time.Now())
		return c, err
	}
	if cfg.TLSCert != "" {
		load = func() (*tls.Certificate, error) { return tlsca.LoadPair(cfg.TLSCert, cfg.TLSKey) }
	}
	h, err := tlsca.NewHolder(load)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	top, err := tlsca.Top(h.Current())
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return &apiTLS{holder: h, fingerprint: tlsca.Fingerprint(top), top: top}, nil
}

// certHosts are the names the made certificate carries: the server IP, the
// API URL's host, the listener's own address, loopback, this host and
// --tls-san.
func certHosts(cfg Config, serverIP netip.Addr, apiURL string, apiAddr net.Addr) []string {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if serverIP.IsValid() {
		hosts = append(hosts, serverIP.String())
	}
	if u, err := url.Parse(apiURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	if ta, ok := apiAddr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		hosts = append(hosts, ta.IP.String())
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return append(hosts, cfg.TLSSANs...)
}

// defaultAPIURL is https:// and the listener's own address when it is
// bound to one, else the server IP (loopback without a boot interface).
func defaultAPIURL(serverIP netip.Addr, apiAddr net.Addr) string {
	host, port := "127.0.0.1", "443"
	if ta, ok := apiAddr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
		switch {
		case !ta.IP.IsUnspecified():
			host = ta.IP.String()
		case serverIP.IsValid():
			host = serverIP.String()
		}
	}
	return "https://" + net.JoinHostPort(host, port)
}

// reloadService loads the certificate again on every signal (SIGHUP) and
// once a day, so a made certificate is renewed before it expires. A failed
// reload keeps the certificate in use and logs why.
func (t *apiTLS) reloadService(reload <-chan os.Signal, log *slog.Logger) Service {
	return ServiceFunc("tls", func(ctx context.Context) error {
		tick := time.NewTicker(24 * time.Hour)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-reload:
			case <-tick.C:
			}
			if err := t.holder.Reload(); err != nil {
				log.Error("api certificate not reloaded; the old one stays in use", "err", err)
				continue
			}
			top, err := tlsca.Top(t.holder.Current())
			if err == nil && tlsca.Fingerprint(top) != t.fingerprint {
				log.Warn("the API certificate's chain now ends in another certificate: machines booted from now on still pin the old one until serve restarts",
					"pinned", t.fingerprint, "served", tlsca.Fingerprint(top))
			}
			log.Info("api certificate loaded", "not_after", t.holder.Current().Leaf.NotAfter.Format(time.RFC3339))
		}
	})
}

// serveCA answers GET /api/v1/ca.pem with the pinned certificate, for
// reporters (Python's ssl) that check its fingerprint themselves and then
// trust it as their CA file.
func (t *apiTLS) serveCA(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(tlsca.PEM(t.top))
}
