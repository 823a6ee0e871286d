package warm

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ingot-dev/ingot/pkg/connlimit"
)

// Limits bound what a client may hold of the service: a request (headers
// and its small body) must arrive within ReadTimeout, an answer leave
// within WriteTimeout, an idle connection closes after IdleTimeout, and
// one address holds at most MaxConnsPerClient connections. The service
// answers one signed request per reimage, so these are tight.
type Limits struct {
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxConnsPerClient                      int
}

// DefaultLimits are `ingot-agent warm`'s.
func DefaultLimits() Limits {
	return Limits{ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, MaxConnsPerClient: 4}
}

// Serve answers h over TLS on ln until ctx ends, then drains for up to 5 s.
// The TLS handshake counts against the read timeout.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, tlsCfg *tls.Config, lim Limits, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{Handler: h, TLSConfig: tlsCfg,
		ReadHeaderTimeout: min(5*time.Second, lim.ReadTimeout), ReadTimeout: lim.ReadTimeout,
		WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	err := srv.ServeTLS(connlimit.PerClient(ln, lim.MaxConnsPerClient, log), "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
