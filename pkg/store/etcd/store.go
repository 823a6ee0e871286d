package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Store is the store.Store kept in an etcd cluster under one key prefix.
// It is safe for concurrent use, and several processes (several ingot
// instances) may open the same prefix: every write is one etcd
// transaction that checks what it read (optimistic concurrency), so they
// never overwrite each other's writes.
type Store struct {
	cli     *clientv3.Client
	ownsCli bool
	k       keys
	cfg     Config
	opts    store.Options
	closed  atomic.Bool
	leases  *group[leaseOp, struct{}]
	events  *group[machine.Event, machine.Event]
	status  statusCache
	applied atomic.Int64 // the highest revision this Store wrote or read linearizably (viewFresh)
}

var _ store.Store = (*Store)(nil)

// groupWorkers is how many transactions of one group commit (leases,
// events) are in flight at once: one round gathers while another commits.
// On this project's 2-core test machine, where the three members and the
// writers share the cores, 1, 2 and 4 measured the same within noise
// (BenchmarkEtcdVsBolt); on separate hosts a round's network and disk
// latency, not CPU, is what a second round in flight hides.
const groupWorkers = 2

// defaultDialTimeout bounds connecting when the URL says nothing
// (dial-timeout=).
const defaultDialTimeout = 5 * time.Second

// Open connects to the cluster c names and checks (or writes, on an empty
// prefix) the key layout version. opts binds as for every backend
// (History, Now, Logger); Timeout and BatchDelay are bbolt's and unused.
func Open(ctx context.Context, c Config, opts store.Options) (*Store, error) {
	return open(ctx, c, opts, false)
}

// open is Open; restoring opens a prefix that a restore holds (Restore's
// own store).
func open(ctx context.Context, c Config, opts store.Options, restoring bool) (*Store, error) {
	opts = opts.WithDefaults()
	if c.DialTimeout <= 0 {
		c.DialTimeout = defaultDialTimeout // not opts.Timeout: that is bbolt's file lock wait
	}
	cc, err := clientConfig(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", c, err)
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: connecting to %s: %w", c, strings.Join(c.Endpoints, ","), err)
	}
	// The client connects in the background: a wrong address, a TLS
	// mismatch or a cluster without quorum shows only as the first request
	// not being answered. Bound that request by the dial timeout and say so.
	octx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	s, err := openClient(octx, cli, c.Prefix, opts, restoring)
	if err != nil {
		cli.Close()
		if octx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("opening store %s: no answer from etcd at %s within %s (check the endpoints, the TLS files and that the cluster has quorum): %w",
				c, strings.Join(c.Endpoints, ","), c.DialTimeout, err)
		}
		return nil, fmt.Errorf("opening store %s: %w", c, err)
	}
	s.cfg, s.ownsCli = c, true
	return s, nil
}

// OpenURL is Open with the Config ParseURL reads from location.
func OpenURL(ctx context.Context, location string, opts store.Options) (*Store, error) {
	c, err := ParseURL(location)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	return Open(ctx, c, opts)
}

// OpenClient is a Store on a client the caller made and keeps (Close
// leaves it open), under prefix ("/a/b/").
func OpenClient(ctx context.Context, cli *clientv3.Client, prefix string, opts store.Options) (*Store, error) {
	return openClient(ctx, cli, prefix, opts, false)
}

func openClient(ctx context.Context, cli *clientv3.Client, prefix string, opts store.Options, restoring bool) (*Store, error) {
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("key prefix %q: expected it to start and end with /", prefix)
	}
	s := &Store{cli: cli, k: keys{prefix}, opts: opts.WithDefaults(),
		cfg: Config{Endpoints: endpointHosts(cli.Endpoints()), Prefix: prefix, RequestTimeout: 30 * time.Second}}
	if err := s.checkLayout(ctx, restoring); err != nil {
		return nil, err
	}
	s.leases = newGroup(s, maxLeasesPerTxn, groupWorkers, s.applyLeases)
	s.events = newGroup(s, maxEventsPerTxn, groupWorkers, s.applyEvents)
	return s, nil
}

// endpointHosts strips the scheme from client URLs (host:port, as Config
// keeps them).
func endpointHosts(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	}
	return out
}

// clientConfig is the etcd client's configuration for c: TLS files and
// the password file read here.
func clientConfig(ctx context.Context, c Config) (clientv3.Config, error) {
	cc := clientv3.Config{Context: ctx, DialTimeout: c.DialTimeout, Username: c.Username, Password: c.Password,
		Logger: zap.NewNop(), RejectOldCluster: false, DialKeepAliveTime: 10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second}
	scheme := "http://"
	if c.TLS {
		scheme = "https://"
		t, err := tlsConfig(c)
		if err != nil {
			return cc, err
		}
		cc.TLS = t
	}
	for _, ep := range c.Endpoints {
		cc.Endpoints = append(cc.Endpoints, scheme+ep)
	}
	if c.PasswordFile != "" {
		raw, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return cc, fmt.Errorf("reading the etcd password: %w", err)
		}
		cc.Password = strings.TrimRight(string(raw), "\r\n")
		if cc.Password == "" {
			return cc, fmt.Errorf("the etcd password file %s is empty", c.PasswordFile)
		}
	}
	// The Context is the client's lifetime, not Open's: only the dial
	// is bounded by ctx (DialTimeout).
	cc.Context = context.WithoutCancel(ctx)
	return cc, nil
}

// tlsConfig loads the CA and client certificate c names.
func tlsConfig(c Config) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CACert != "" {
		pem, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, fmt.Errorf("reading the etcd CA: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the etcd CA file %s holds no PEM certificate", c.CACert)
		}
	}
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("loading the etcd client certificate %s and key %s: %w", c.Cert, c.Key, err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}

// checkLayout writes the layout version on an empty prefix, and refuses
// a prefix written by a newer ingot, or one a restore is writing (unless
// restoring: the restore's own store).
func (s *Store) checkLayout(ctx context.Context, restoring bool) error {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	key, mark := s.k.layout(), s.k.restoring()
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(layoutVersion)), clientv3.OpGet(mark)).
		Else(clientv3.OpGet(key), clientv3.OpGet(mark)).Commit()
	if err != nil {
		return fmt.Errorf("reading the layout version %s: %w", key, err)
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 && !restoring {
		return fmt.Errorf("a restore is writing prefix %s (or died halfway: %s is set; delete the prefix with etcdctl del --prefix %s and restore again): %w",
			s.k.p, mark, s.k.p, store.ErrLocked)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("layout version %s vanished while read: %w", key, store.ErrConflict)
	}
	v, err := strconv.Atoi(string(kvs[0].Value))
	if err != nil {
		return fmt.Errorf("layout version %s is %q, expected a number: %w", key, kvs[0].Value, store.ErrSchema)
	}
	if v > layoutVersion {
		return fmt.Errorf("layout version %d under %s is newer than this ingot understands (%d): %w; run a newer ingot",
			v, s.k.p, layoutVersion, store.ErrSchema)
	}
	return nil
}

// Close releases the client (if Open made it). Later calls of every
// method return store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.leases.close()
	s.events.close()
	if !s.ownsCli {
		return nil
	}
	if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("closing store %s: %w", s.cfg, err)
	}
	return nil
}

// Client is the etcd client the store uses (for health and quota checks).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix is the key prefix the store's records are under.
func (s *Store) Prefix() string { return s.k.p }

// ready fails with ErrClosed after Close and with ctx's error when it is done.
func (s *Store) ready(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// reqCtx bounds a request by the store's request timeout when ctx has no
// deadline of its own, so a cluster without quorum fails the call rather
// than hanging it.
func (s *Store) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	d := s.cfg.RequestTimeout
	if d <= 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// mapErr turns an error of a call on a closed store into ErrClosed.
func (s *Store) mapErr(err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("%w (%v)", store.ErrClosed, err)
	}
	return err
}
