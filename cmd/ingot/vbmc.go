package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

const vbmcSynopsis = `vbmc --mockup DIR [flags]

Run virtual Redfish BMCs: each serves a Redfish mockup tree in the DMTF layout
(DIR/redfish/v1/.../index.json, e.g. testdata/redfish-mockups/dmtf-public-tower)
and keeps state like a real BMC: power state changes on ComputerSystem.Reset,
a one-time boot override is consumed at the next boot, BIOS settings PATCHed
to the settings object stay pending until the next reset, sessions and basic
auth are enforced, account passwords can be rotated, virtual media can be
inserted and ejected. Faults can be injected to test clients: latency, 503s,
dropped connections, endpoints that never answer.

With --count N, N independent BMCs listen on ports --port-base .. +N-1, each
with its own state. With --qemu-args, the single BMC powers a real QEMU VM:
power on starts qemu-system-x86_64 booting from the override (Pxe: network,
Hdd: disk, Cd: cdrom), power off stops it.

Examples:
  ingot vbmc --mockup testdata/redfish-mockups/dmtf-public-tower --user admin --password-file pw
  ingot vbmc --mockup DIR --count 50 --port-base 9000 --latency 700ms --fail503 0.3
  redfishtool -r 127.0.0.1:8000 -u admin -p PASS -S Never Systems`

// vbmcFlags is everything `ingot vbmc` reads from its flags.
type vbmcFlags struct {
	mockup, listen          string
	count, portBase         int
	user, passwordFile      string
	latency                 time.Duration
	fail503, drop           float64
	hang, stuckBIOS         string
	maxInFlight             int
	maxSessions             int
	sessionTimeout          time.Duration
	lockout                 vbmc.Lockout
	tlsCert, tlsKey         string
	tlsSelfSigned           bool
	tlsCertOut              string
	seed                    int64
	qemuBinary, qemuArgs    string
	qemuGrace               time.Duration
	logLevel                string
	password                string // read from passwordFile
	hangList, stuckBIOSList []string
	host                    string
	port                    int
}

func parseVBMCFlags(e *env, args []string) (*vbmcFlags, error) {
	f := &vbmcFlags{}
	fs := e.flagSet("vbmc", vbmcSynopsis)
	fs.StringVar(&f.mockup, "mockup", "", "mockup directory in the DMTF layout (`DIR`/redfish/v1/index.json); required")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8000", "`ADDR:PORT` of the (first) BMC")
	fs.IntVar(&f.count, "count", 1, "number of independent BMCs, one port each")
	fs.IntVar(&f.portBase, "port-base", 0, "first `PORT` when --count > 1 (default: the --listen port)")
	fs.StringVar(&f.user, "user", "", "enforced user name; empty serves without authentication")
	fs.StringVar(&f.passwordFile, "password-file", "", "`FILE` holding the enforced password (first line)")
	fs.DurationVar(&f.latency, "latency", 0, "delay every request by `DURATION`")
	fs.Float64Var(&f.fail503, "fail503", 0, "probability (0..1) of answering 503 with Retry-After")
	fs.Float64Var(&f.drop, "drop", 0, "probability (0..1) of closing the connection without an answer")
	fs.StringVar(&f.hang, "hang", "", "comma-separated path `PREFIXES` that never answer (e.g. /redfish/v1/Systems)")
	fs.DurationVar(&f.sessionTimeout, "session-timeout", 0, "end sessions idle this long (`DURATION`); 0: never")
	fs.IntVar(&f.maxSessions, "max-sessions", 0, "refuse logins beyond `N` open sessions (like BMCs that lock out leaky clients); 0: no limit")
	fs.IntVar(&f.lockout.Threshold, "lockout-threshold", 0, "lock an account after `N` failed logins in a row (Redfish AccountLockoutThreshold); 0: never")
	fs.DurationVar(&f.lockout.Duration, "lockout-duration", 5*time.Minute, "how long a locked account stays locked (whole seconds)")
	fs.IntVar(&f.maxInFlight, "max-in-flight", 0, "answer 503 (busy) beyond `N` requests at once per BMC; 0: no limit")
	fs.StringVar(&f.stuckBIOS, "stuck-bios", "", "comma-separated BIOS `ATTRIBUTES` that refuse to stick at the reset")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM; with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "private key `FILE` for --tls-cert")
	fs.BoolVar(&f.tlsSelfSigned, "tls-self-signed", false, "serve HTTPS with a fresh self-signed certificate")
	fs.StringVar(&f.tlsCertOut, "tls-cert-out", "", "write the self-signed certificate to `FILE` (PEM) for clients to pin")
	fs.Int64Var(&f.seed, "seed", 1, "seed for fault randomness (BMC i uses seed+i)")
	fs.StringVar(&f.qemuBinary, "qemu-binary", "qemu-system-x86_64", "QEMU program for --qemu-args")
	fs.StringVar(&f.qemuArgs, "qemu-args", "", "power a QEMU VM with these space-separated `ARGS` (machine, memory, disks, NICs; --count 1)")
	fs.DurationVar(&f.qemuGrace, "qemu-grace", time.Minute, "how long GracefulShutdown waits for the guest before forcing it off")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug (one line per request), info, warn, error")
	if err := e.parse(fs, args); err != nil {
		return nil, err
	}
	if wantsHelp(args) {
		return nil, nil // e.parse printed the usage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("vbmc: unexpected argument %q (all settings are flags; see ingot vbmc -h)", fs.Arg(0))
	}
	return f, f.check()
}

// check validates the flags and derives host, port and lists.
func (f *vbmcFlags) check() error {
	if f.mockup == "" {
		return errors.New("vbmc: --mockup DIR is required (a folder holding redfish/v1/index.json)")
	}
	host, port, err := net.SplitHostPort(f.listen)
	if err != nil {
		return fmt.Errorf("vbmc: --listen %q: expected ADDR:PORT: %w", f.listen, err)
	}
	f.host = host
	if f.port, err = strconv.Atoi(port); err != nil {
		return fmt.Errorf("vbmc: --listen %q: port %q is not a number", f.listen, port)
	}
	if f.count < 1 {
		return fmt.Errorf("vbmc: --count %d: expected at least 1", f.count)
	}
	if f.count > 1 {
		if f.portBase == 0 {
			f.portBase = f.port
		}
		if f.portBase < 1 || f.portBase+f.count-1 > 65535 {
			return fmt.Errorf("vbmc: --port-base %d with --count %d: ports must lie in 1..65535", f.portBase, f.count)
		}
		if f.qemuArgs != "" {
			return errors.New("vbmc: --qemu-args drives one VM; use --count 1")
		}
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("vbmc: --tls-cert and --tls-key go together")
	}
	if f.tlsCert != "" && f.tlsSelfSigned {
		return errors.New("vbmc: choose --tls-cert/--tls-key or --tls-self-signed, not both")
	}
	if f.user != "" {
		if f.passwordFile == "" {
			return errors.New("vbmc: --user needs --password-file (the password is never a flag)")
		}
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return fmt.Errorf("vbmc: reading --password-file: %w", err)
		}
		f.password = strings.TrimRight(strings.SplitN(string(b), "\n", 2)[0], "\r")
	}
	f.hangList = splitList(f.hang)
	f.stuckBIOSList = splitList(f.stuckBIOS)
	return nil
}

// wantsHelp reports whether args ask for -h, which the flag package answers
// with the usage before any check.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "--h":
			return true
		case "--":
			return false
		}
	}
	return false
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// addrs lists the listen address of each BMC.
func (f *vbmcFlags) addrs() []string {
	if f.count == 1 {
		return []string{f.listen}
	}
	out := make([]string, f.count)
	for i := range out {
		out[i] = net.JoinHostPort(f.host, strconv.Itoa(f.portBase+i))
	}
	return out
}

func (f *vbmcFlags) config(log *slog.Logger) vbmc.Config {
	return vbmc.Config{
		Root:     f.mockup,
		Username: f.user,
		Password: f.password,
		Faults: vbmc.Faults{Latency: f.latency, Error503: f.fail503, DropConn: f.drop, Hang: f.hangList,
			MaxInFlight: f.maxInFlight},
		StuckBIOS:      f.stuckBIOSList,
		MaxSessions:    f.maxSessions,
		SessionTimeout: f.sessionTimeout,
		Lockout:        f.lockout,
		Logger:         log,
		Seed:           f.seed,
	}
}

func (f *vbmcFlags) tlsConfig() (*tls.Config, string, error) {
	switch {
	case f.tlsCert != "":
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, "", fmt.Errorf("vbmc: loading --tls-cert/--tls-key: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, "", nil
	case f.tlsSelfSigned:
		hosts := []string{"localhost", "127.0.0.1", "::1"}
		if f.host != "" && f.host != "0.0.0.0" && f.host != "::" {
			hosts = append(hosts, f.host)
		}
		conf, pemBytes, fp, err := vbmc.SelfSigned(hosts, time.Now())
		if err != nil {
			return nil, "", fmt.Errorf("vbmc: %w", err)
		}
		if f.tlsCertOut != "" {
			if err := durable.WriteFile(f.tlsCertOut, pemBytes, 0o644); err != nil {
				return nil, "", fmt.Errorf("vbmc: writing --tls-cert-out: %w", err)
			}
		}
		return conf, fp, nil
	}
	return nil, "", nil
}

func runVBMC(ctx context.Context, e *env, args []string) error {
	f, err := parseVBMCFlags(e, args)
	if err != nil || f == nil {
		return err
	}
	log := e.logger(f.logLevel)
	tlsConf, fingerprint, err := f.tlsConfig()
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	var qemu *vbmc.QEMU
	if f.qemuArgs != "" {
		qemu = &vbmc.QEMU{Binary: f.qemuBinary, Args: strings.Fields(f.qemuArgs), Grace: f.qemuGrace, Logger: log}
		defer qemu.PowerOff(context.WithoutCancel(ctx))
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	cfg := f.config(log)
	if qemu != nil {
		cfg.Backend = qemu
	}
	bmcs, err := vbmc.NewMany(cfg, f.count) // one loaded mockup, N states
	if err != nil {
		return fmt.Errorf("vbmc: %w", err)
	}
	for i, addr := range f.addrs() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("vbmc: BMC %d of %d: %w", i+1, f.count, err)
		}
		lns = append(lns, ln)
	}
	for i, ln := range lns {
		fmt.Fprintf(e.stdout, "%s://%s/redfish/v1  (BMC %d of %d, mockup %s, power %s)\n",
			scheme, ln.Addr(), i+1, len(lns), f.mockup, bmcs[i].Power())
	}
	if fingerprint != "" {
		fmt.Fprintf(e.stdout, "TLS self-signed certificate SHA-256 %s\n", fingerprint)
	}
	log.Info("virtual BMCs ready", "count", len(lns), "auth", f.user != "", "latency", f.latency,
		"fail503", f.fail503, "drop", f.drop, "hang", f.hangList)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(lns))
	for i, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := vbmc.Serve(ctx, ln, bmcs[i], tlsConf); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	lns = nil // Serve owns them now
	wg.Wait()
	close(errs)
	return <-errs
}
