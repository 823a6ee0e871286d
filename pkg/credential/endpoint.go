package credential

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Origin is the form BMC endpoints are compared in when a credential is
// bound to them: scheme://host[:port][/path], the scheme and host in lower
// case, the default port (443 for https, 80 for http) and a trailing slash
// dropped. The scheme is part of it: a secret bound to https://10.0.0.5 is
// not sent to http://10.0.0.5.
func Origin(endpoint string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil {
		return "", fmt.Errorf("BMC endpoint %q: %w", endpoint, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "https" && scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("BMC endpoint %q: expected https://HOST[:PORT] (or http:// on a machine marked insecure)", endpoint)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" || strings.Contains(host, ":") {
		host = net.JoinHostPort(host, port)
		host = strings.TrimSuffix(host, ":") // an IPv6 host without a port: [::1]
	}
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// CheckTransport refuses to send a credential to b over plain http unless
// the machine is marked insecure (machine.BMC.Insecure: the operator says
// the link to this BMC protects nothing, a lab's loopback or an isolated
// management network), and refuses an endpoint that is not an http(s) URL.
func CheckTransport(b machine.BMC) error {
	o, err := Origin(b.Endpoint)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if strings.HasPrefix(o, "http://") && !b.Insecure {
		return fmt.Errorf("%w: BMC endpoint %s is plain http, which would send the credential unencrypted: use https, "+
			"or enrol the machine with --bmc-insecure where the management network is trusted (a lab)", ErrRefused, b.Endpoint)
	}
	return nil
}
