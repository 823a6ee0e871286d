package etcd

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is what an etcd:// URL says: where the cluster is, the key prefix
// this site's records live under, and how to authenticate. ParseURL makes
// one without touching the network or the disk; Open reads the files it
// names.
type Config struct {
	// Endpoints are host:port of the cluster's client URLs.
	Endpoints []string
	// Prefix starts and ends with "/": every key of the store is under it,
	// so several sites (or a test per case) share one cluster.
	Prefix string
	// TLS: talk to the endpoints over TLS (https). Set by tls=true or by
	// any of cacert, cert and key.
	TLS bool
	// CACert is the PEM file of the CA that signed the servers'
	// certificates ("" = the system's roots).
	CACert string
	// Cert and Key are the PEM files of the client certificate etcd's
	// --client-cert-auth checks; both or neither.
	Cert, Key string
	// ServerName overrides the name the servers' certificates are checked
	// against ("" = the endpoint's host).
	ServerName string
	// Username and Password log in to etcd's own auth (etcdctl user add).
	// PasswordFile names a file holding the password (one line), read by
	// Open: a password written in the URL shows in process lists and logs.
	Username, Password, PasswordFile string
	// DialTimeout bounds connecting at Open (default 5s); RequestTimeout
	// bounds each request made without a deadline of its own (default 30s).
	DialTimeout, RequestTimeout time.Duration
	// QuotaBytes is the cluster's --quota-backend-bytes (default
	// DefaultQuota, 2 GiB; etcd allows 8 GiB at most): a 3.4 server does
	// not report it, and Stats measures the database against it.
	QuotaBytes int64
}

// DefaultPort is etcd's client port, used when an endpoint names none.
const DefaultPort = "2379"

// queryParams are the query parameters ParseURL knows, for its errors.
var queryParams = []string{"cacert", "cert", "key", "tls", "server-name", "user", "password", "password-file",
	"dial-timeout", "timeout", "quota"}

// prefixSegment is one path segment of a key prefix.
var prefixSegment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ParseURL reads etcd://host1:2379,host2:2379/prefix?param=value&...:
//
//	etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/ingot/site-a
//	  ?cacert=/etc/ingot/etcd-ca.pem&cert=/etc/ingot/etcd.pem&key=/etc/ingot/etcd-key.pem
//	  &user=ingot&password-file=/etc/ingot/etcd.password
//
// Endpoints are separated by commas; a missing port is 2379; an IPv6
// address is written in brackets. The path is the key prefix and is
// required: segments of letters, digits, '.', '_' and '-'. Parameters:
// cacert, cert, key, tls (true/false), server-name, user, password,
// password-file, dial-timeout and timeout (Go durations), quota (the
// cluster's --quota-backend-bytes: 2GiB when not given). Every error names
// the part of the URL that is wrong and what was expected.
func ParseURL(raw string) (Config, error) {
	rest, ok := strings.CutPrefix(raw, "etcd://")
	if !ok {
		return Config{}, fmt.Errorf("etcd URL %q: expected it to start with etcd://", redact(raw))
	}
	authority, pathQuery, _ := strings.Cut(rest, "/")
	if strings.ContainsAny(authority, "?#") {
		return Config{}, fmt.Errorf("etcd URL %s: no key prefix: write etcd://host:2379/prefix", redact(raw))
	}
	if strings.Contains(authority, "@") {
		return Config{}, fmt.Errorf("etcd URL %s: user information before the host is not taken: give ?user=NAME&password-file=FILE (a password in the URL shows in process lists)", redact(raw))
	}
	var c Config
	var err error
	if c.Endpoints, err = parseEndpoints(authority); err != nil {
		return Config{}, fmt.Errorf("etcd URL %s: %w", redact(raw), err)
	}
	path, query, _ := strings.Cut(pathQuery, "?")
	if strings.Contains(path, "#") || strings.Contains(query, "#") {
		return Config{}, fmt.Errorf("etcd URL %s: a fragment (#...) is not taken", redact(raw))
	}
	if c.Prefix, err = parsePrefix(path); err != nil {
		return Config{}, fmt.Errorf("etcd URL %s: %w", redact(raw), err)
	}
	if err := parseQuery(&c, query); err != nil {
		return Config{}, fmt.Errorf("etcd URL %s: %w", redact(raw), err)
	}
	return c, nil
}

// parseEndpoints reads the comma-separated host[:port] list.
func parseEndpoints(authority string) ([]string, error) {
	if authority == "" {
		return nil, fmt.Errorf("no endpoint: write etcd://host:2379/prefix")
	}
	var out []string
	for i, ep := range strings.Split(authority, ",") {
		hp, err := parseEndpoint(ep)
		if err != nil {
			return nil, fmt.Errorf("endpoint %d %q: %w", i+1, ep, err)
		}
		if slices.Contains(out, hp) {
			return nil, fmt.Errorf("endpoint %d %q: listed twice", i+1, ep)
		}
		out = append(out, hp)
	}
	return out, nil
}

// parseEndpoint returns host:port for host, host:port, [v6] or [v6]:port.
func parseEndpoint(ep string) (string, error) {
	host, port := ep, DefaultPort
	switch {
	case ep == "":
		return "", fmt.Errorf("empty (two commas in a row, or one at an end?)")
	case strings.HasPrefix(ep, "["):
		inside, after, ok := strings.Cut(ep[1:], "]")
		if !ok || (after != "" && !strings.HasPrefix(after, ":")) {
			return "", fmt.Errorf("expected [IPv6] or [IPv6]:port")
		}
		host = inside
		if after != "" {
			port = after[1:]
		}
	case strings.Count(ep, ":") == 1:
		host, port, _ = strings.Cut(ep, ":")
	case strings.Contains(ep, ":"):
		return "", fmt.Errorf("an IPv6 address goes in brackets: [%s]:%s", ep, DefaultPort)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q: expected a number from 1 to 65535", port)
	}
	if host == "" || strings.ContainsAny(host, " \t/\\%[]") {
		return "", fmt.Errorf("host %q: expected a host name or an IP address", host)
	}
	return net.JoinHostPort(host, port), nil
}

// parsePrefix turns the URL's path into the key prefix "/a/b/".
func parsePrefix(path string) (string, error) {
	path = strings.Trim(path, "/")
	if path == "" {
		return "", fmt.Errorf("no key prefix: write etcd://host:2379/ingot (the prefix every key of this site goes under)")
	}
	for _, seg := range strings.Split(path, "/") {
		if !prefixSegment.MatchString(seg) {
			return "", fmt.Errorf("key prefix segment %q: expected letters, digits, '.', '_' or '-', starting with a letter or digit", seg)
		}
	}
	return "/" + path + "/", nil
}

// parseQuery sets c from the URL's parameters.
func parseQuery(c *Config, query string) error {
	q, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	tlsSet := false
	for name, vals := range q {
		if !slices.Contains(queryParams, name) {
			return fmt.Errorf("parameter %q is not known: expected one of %s", name, strings.Join(queryParams, ", "))
		}
		if len(vals) != 1 {
			return fmt.Errorf("parameter %q given %d times: expected once", name, len(vals))
		}
		if err := setParam(c, name, vals[0], &tlsSet); err != nil {
			return fmt.Errorf("parameter %s: %w", name, err)
		}
	}
	return checkConfig(c, tlsSet)
}

// setParam sets one parameter of c.
func setParam(c *Config, name, v string, tlsSet *bool) error {
	if v == "" {
		return fmt.Errorf("empty value")
	}
	var err error
	switch name {
	case "cacert":
		c.CACert = v
	case "cert":
		c.Cert = v
	case "key":
		c.Key = v
	case "server-name":
		c.ServerName = v
	case "tls":
		c.TLS, err = strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q: expected true or false", v)
		}
		*tlsSet = true
	case "user":
		c.Username = v
	case "password":
		c.Password = v
	case "password-file":
		c.PasswordFile = v
	case "dial-timeout":
		c.DialTimeout, err = positiveDuration(v)
	case "timeout":
		c.RequestTimeout, err = positiveDuration(v)
	case "quota":
		c.QuotaBytes, err = parseBytes(v)
	}
	return err
}

func positiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: expected a positive duration such as 5s", v)
	}
	return d, nil
}

// maxQuota is the largest quota etcd documents (8 GiB).
const maxQuota = 8 << 30

// parseBytes reads a size: a number of bytes, or one with a unit KiB, MiB
// or GiB (quota=8GiB), at most maxQuota.
func parseBytes(v string) (int64, error) {
	num, mult := v, int64(1)
	for unit, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(v, unit); ok {
			num, mult = n, m
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > maxQuota/mult {
		return 0, fmt.Errorf("%q: expected a size such as 2GiB, at most 8GiB (etcd's limit)", v)
	}
	return n * mult, nil
}

// checkConfig checks the parameters against each other.
func checkConfig(c *Config, tlsSet bool) error {
	files := c.CACert != "" || c.Cert != "" || c.Key != "" || c.ServerName != ""
	switch {
	case tlsSet && !c.TLS && files:
		return fmt.Errorf("tls=false with cacert, cert, key or server-name: drop tls=false to use TLS")
	case (c.Cert == "") != (c.Key == ""):
		return fmt.Errorf("cert and key: give both (the client certificate and its key) or neither")
	case c.Password != "" && c.PasswordFile != "":
		return fmt.Errorf("password and password-file: give one")
	case (c.Password != "" || c.PasswordFile != "") && c.Username == "":
		return fmt.Errorf("a password without user: add user=NAME")
	case c.Username != "" && c.Password == "" && c.PasswordFile == "":
		return fmt.Errorf("user %s without a password: add password-file=FILE", c.Username)
	}
	c.TLS = c.TLS || files
	return nil
}

// passwordParam matches a password's value in a URL, to hide it.
var passwordParam = regexp.MustCompile(`([?&]password=)[^&#]*`)

// redact returns raw with the value of a password parameter hidden.
func redact(raw string) string { return passwordParam.ReplaceAllString(raw, "${1}xxxxx") }

// String is the URL c was read from in its canonical form, with any
// password hidden.
func (c Config) String() string {
	q := url.Values{}
	for name, v := range map[string]string{"cacert": c.CACert, "cert": c.Cert, "key": c.Key,
		"server-name": c.ServerName, "user": c.Username, "password-file": c.PasswordFile} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if c.Password != "" {
		q.Set("password", "xxxxx")
	}
	if c.TLS && c.CACert == "" && c.Cert == "" && c.ServerName == "" {
		q.Set("tls", "true")
	}
	if c.DialTimeout > 0 {
		q.Set("dial-timeout", c.DialTimeout.String())
	}
	if c.RequestTimeout > 0 {
		q.Set("timeout", c.RequestTimeout.String())
	}
	if c.QuotaBytes > 0 {
		q.Set("quota", strconv.FormatInt(c.QuotaBytes, 10))
	}
	s := "etcd://" + strings.Join(c.Endpoints, ",") + strings.TrimSuffix(c.Prefix, "/")
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}
