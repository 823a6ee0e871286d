package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"

	"github.com/ingot-dev/ingot/pkg/client"
)

// Where a client finds its server and token, first match wins:
//  1. --server, --token, --token-file, --ca (or INGOT_SERVER, INGOT_TOKEN,
//     INGOT_TOKEN_FILE, INGOT_CA);
//  2. the context --context (INGOT_CONTEXT) names, else the config file's
//     current-context (~/.config/ingot/config.yaml, or INGOT_CONFIG);
//  3. https://127.0.0.1:8443, trusting the CA `ingot serve` made in its
//     data folder (/var/lib/ingot/tls/ca.pem), with ~/.config/ingot/token,
//     else the token the first `ingot serve` wrote into its data folder.
const defaultServer = "https://127.0.0.1:8443"

// apiFlags are the connection flags of every command that talks to a
// running server.
type apiFlags struct {
	server, token, tokenFile, ca, context string
	output                                string
}

// addAPIFlags adds the connection flags and -o.
func addAPIFlags(fs *flag.FlagSet) *apiFlags {
	f := &apiFlags{}
	fs.StringVar(&f.server, "server", "", "ingot server URL (default: the config's current context, else "+defaultServer+")")
	fs.StringVar(&f.token, "token", "", "operator API token (prefer INGOT_TOKEN or --token-file)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the operator API token")
	fs.StringVar(&f.ca, "ca", "", "PEM file of the CA that signed the server's certificate (https)")
	fs.StringVar(&f.context, "context", "", "named context of the config file (ingot config use-context)")
	fs.StringVar(&f.output, "o", "table", "output format: table, json or yaml")
	return f
}

// conn is the resolved connection.
type conn struct {
	server, token, ca string
}

// resolve applies flags, then the context, then the defaults.
func (f *apiFlags) resolve(e *env) (conn, error) {
	cfg, err := loadConfig(configPath(e))
	if err != nil {
		return conn{}, err
	}
	var ctx Context
	if name := firstNonEmpty(f.context, cfg.CurrentContext); name != "" {
		c, ok := cfg.Contexts[name]
		if !ok {
			return conn{}, fmt.Errorf("context %q: not in %s (have %s)", name, configPath(e), strings.Join(cfg.names(), ", "))
		}
		ctx = c
	}
	out := conn{server: firstNonEmpty(f.server, ctx.Server, defaultServer), ca: firstNonEmpty(f.ca, ctx.CA)}
	if out.ca == "" && out.server == defaultServer {
		// On the server's own host: the CA serve made, when readable.
		if p := filepath.Join(defaultServeData, "tls", "ca.pem"); fileExists(p) {
			out.ca = p
		}
	}
	out.token = strings.TrimSpace(f.token)
	if out.token == "" {
		if out.token, err = readToken(e, firstNonEmpty(f.tokenFile, ctx.TokenFile)); err != nil {
			return conn{}, err
		}
	}
	return out, nil
}

// readToken reads the token file; "" tries the default places.
func readToken(e *env, file string) (string, error) {
	tried := []string{file}
	if file == "" {
		home, _ := os.UserHomeDir()
		tried = []string{filepath.Join(home, ".config", "ingot", "token"), filepath.Join(defaultServeData, wire.BootstrapTokenFile)}
	}
	for _, p := range tried {
		if b, err := os.ReadFile(p); err == nil {
			if tok := strings.TrimSpace(string(b)); tok != "" {
				return tok, nil
			}
		} else if file != "" {
			return "", fmt.Errorf("token file %s: %w", file, err)
		}
	}
	return "", fmt.Errorf("no API token: set --token-file, INGOT_TOKEN or a context (ingot config set-context); looked in %s", strings.Join(tried, ", "))
}

// client builds the API client, warning on stderr when the server's
// version differs from this binary's.
func (f *apiFlags) client(e *env) (*client.Client, error) {
	if err := checkOutput(f.output); err != nil {
		return nil, err
	}
	c, err := f.resolve(e)
	if err != nil {
		return nil, err
	}
	hc, err := httpClient(c.ca)
	if err != nil {
		return nil, err
	}
	return client.New(client.Config{Server: c.server, Token: c.token, HTTP: hc, Version: version,
		Warn: func(msg string) { fmt.Fprintln(e.stderr, "ingot: warning:", msg) }})
}

// httpClient trusts the CA in caFile (PEM) besides the system's.
func httpClient(caFile string) (*http.Client, error) {
	hc := &http.Client{Timeout: 5 * time.Minute}
	if caFile == "" {
		return hc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it", caFile)
	}
	hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return hc, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func checkOutput(o string) error {
	switch o {
	case "table", "json", "yaml":
		return nil
	}
	return errors.New("-o " + o + ": expected table, json or yaml")
}
