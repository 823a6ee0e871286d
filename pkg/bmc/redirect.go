package bmc

import (
	"fmt"
	"io"
	"net/http"
)

// maxRedirects bounds the hops the redirector follows for one request.
const maxRedirects = 5

// redirector is the outermost http.RoundTripper (QuirkRedirect): a BMC
// that answers a Redfish URL with 301, 302, 303, 307 or 308 gets the same
// method, headers and body again at the Location, as long as it stays on
// the BMC's own scheme and host. net/http would turn a redirected POST or
// PATCH (301/302/303) into a bodyless GET, so a reset or a boot override
// would be lost while the caller saw success; and it would carry the
// session token to whatever host the Location names. A redirect elsewhere
// is an error that names it.
type redirector struct {
	next     http.RoundTripper
	endpoint string
	quirks   *quirkLog
}

func (r *redirector) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	for hop := 0; err == nil && isRedirect(resp.StatusCode); hop++ {
		loc := resp.Header.Get("Location")
		if loc == "" {
			return resp, nil
		}
		next, rerr := r.follow(req, loc, resp.StatusCode, hop)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		r.quirks.record(QuirkRedirect)
		req = next
		resp, err = r.next.RoundTrip(req)
	}
	return resp, err
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// follow builds the request to send to loc: the same method, headers and
// body, on the same scheme and host only.
func (r *redirector) follow(req *http.Request, loc string, status, hop int) (*http.Request, error) {
	op := fmt.Sprintf("%s %s: answered %d with Location %s", req.Method, req.URL.Path, status, loc)
	u, err := req.URL.Parse(loc)
	if err != nil {
		return nil, &Error{Kind: KindBadResponse, Endpoint: r.endpoint, Op: op, Status: status, Err: err}
	}
	if u.Scheme != req.URL.Scheme || u.Host != req.URL.Host {
		return nil, &Error{Kind: KindUnsupported, Endpoint: r.endpoint, Op: op, Status: status,
			Err: fmt.Errorf("the BMC redirects to another address (%s://%s); ingot follows redirects only on the BMC's own "+
				"scheme and host, so that no credential travels elsewhere: use that address as the endpoint", u.Scheme, u.Host)}
	}
	if hop >= maxRedirects {
		return nil, &Error{Kind: KindBadResponse, Endpoint: r.endpoint, Op: op, Status: status,
			Err: fmt.Errorf("more than %d redirects", maxRedirects)}
	}
	out := req.Clone(req.Context())
	out.URL = u
	out.Host = ""
	out.RequestURI = ""
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, &Error{Kind: KindUnsupported, Endpoint: r.endpoint, Op: op, Status: status,
				Err: fmt.Errorf("the request body cannot be sent again")}
		}
		b, err := req.GetBody()
		if err != nil {
			return nil, &Error{Kind: KindOther, Endpoint: r.endpoint, Op: op, Err: err}
		}
		out.Body = b
	}
	return out, nil
}
