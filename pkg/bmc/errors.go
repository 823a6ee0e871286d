package bmc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"

	"github.com/stmcginnis/gofish/schemas"
)

// Kind classifies a BMC error. Callers branch on it with errors.As:
//
//	var be *bmc.Error
//	if errors.As(err, &be) && be.Kind == bmc.KindAuth { ... }
type Kind int

// The kinds of BMC error.
const (
	KindOther       Kind = iota
	KindAuth             // 401/403: wrong credentials or not allowed
	KindNotFound         // 404/410: the resource does not exist on this BMC
	KindUnsupported      // 405/501, or the BMC lacks the resource or value asked for
	KindBusy             // 409/429/503 after all retries: the BMC is busy or locked
	KindTimeout          // no answer within the read or connect timeout
	KindUnreachable      // connection refused, reset or TLS failure
	KindInvalid          // 400/412/422: the BMC rejected what was sent
	KindServer           // other 5xx after all retries
	KindBadResponse      // HTTP 200 with an empty or error body, or JSON that does not parse
	KindCanceled         // the caller's context was canceled
)

var kindNames = map[Kind]string{
	KindOther: "error", KindAuth: "authentication failed", KindNotFound: "not found",
	KindUnsupported: "unsupported", KindBusy: "BMC busy", KindTimeout: "timeout",
	KindUnreachable: "unreachable", KindInvalid: "request rejected", KindServer: "BMC internal error",
	KindBadResponse: "bad response", KindCanceled: "canceled",
}

func (k Kind) String() string { return kindNames[k] }

// Error is every error the bmc package returns from a BMC operation. It names
// the BMC and the operation and carries the BMC's @Message.ExtendedInfo
// messages.
type Error struct {
	Kind     Kind
	Endpoint string   // the BMC, e.g. https://10.0.0.5
	Op       string   // what was being done: "power on", "read /redfish/v1/Systems"
	Status   int      // HTTP status, 0 when none was received
	Messages []string // the BMC's extended messages (MessageId: Message)
	Err      error    // the underlying error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bmc %s", e.Endpoint)
	if e.Op != "" {
		fmt.Fprintf(&b, ": %s", e.Op)
	}
	fmt.Fprintf(&b, ": %s", e.Kind)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if len(e.Messages) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(e.Messages, "; "))
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the underlying error (a *schemas.Error from gofish, a
// context error, a net error ...).
func (e *Error) Unwrap() error { return e.Err }

// IsKind reports whether err is (or wraps) a *Error of kind k.
func IsKind(err error, k Kind) bool {
	var be *Error
	return errors.As(err, &be) && be.Kind == k
}

// kindForStatus maps an HTTP status to a Kind.
func kindForStatus(status int) Kind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusNotFound || status == http.StatusGone:
		return KindNotFound
	case status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		return KindUnsupported
	case status == http.StatusConflict || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return KindBusy
	case status == http.StatusBadRequest || status == http.StatusPreconditionFailed ||
		status == http.StatusUnprocessableEntity || status == http.StatusPreconditionRequired:
		return KindInvalid
	case status >= 500:
		return KindServer
	}
	return KindOther
}

// wrapErr classifies err into a *Error naming endpoint and op. A *Error
// already in the chain keeps its kind and status; op and endpoint are filled
// in when missing.
func wrapErr(endpoint, op string, err error) error {
	if err == nil {
		return nil
	}
	var be *Error
	if errors.As(err, &be) {
		out := *be
		if out.Endpoint == "" {
			out.Endpoint = endpoint
		}
		if op != "" && out.Op != op {
			if out.Op != "" {
				out.Op = op + ": " + out.Op
			} else {
				out.Op = op
			}
		}
		return &out
	}
	var ce *schemas.CollectionError
	if errors.As(err, &ce) && len(ce.Failures) > 0 {
		// gofish's CollectionError does not unwrap: classify by the first
		// failed member (in link order) and keep the whole error.
		links := slices.Sorted(maps.Keys(ce.Failures))
		e := wrapErr(endpoint, op, ce.Failures[links[0]]).(*Error)
		e.Err = err
		return e
	}
	e := &Error{Endpoint: endpoint, Op: op, Err: err}
	var se *schemas.Error
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var nerr net.Error
	var operr *net.OpError
	switch {
	case errors.As(err, &se):
		e.Status = se.HTTPReturnedStatusCode
		e.Kind = kindForStatus(e.Status)
		e.Messages = redfishMessages(se)
		if e.Status == 0 && e.Kind == KindOther {
			e.Kind = KindUnsupported // gofish: "no target provided" — the resource has no such link/action
		}
	case isCertError(err):
		e.Kind = KindUnreachable
	case errors.Is(err, context.Canceled):
		e.Kind = KindCanceled
	case errors.Is(err, context.DeadlineExceeded):
		e.Kind = KindTimeout
	case errors.As(err, &nerr) && nerr.Timeout():
		e.Kind = KindTimeout
	case errors.As(err, &syn), errors.As(err, &typ), errors.Is(err, io.ErrUnexpectedEOF):
		e.Kind = KindBadResponse
	case errors.As(err, &operr), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF):
		e.Kind = KindUnreachable
	}
	return e
}

// redfishMessages lists a Redfish error's messages, most specific first.
func redfishMessages(se *schemas.Error) []string {
	var out []string
	for _, m := range se.ExtendedInfos {
		if l := messageLine(m.MessageID, m.Message); l != "" {
			out = append(out, l)
		}
	}
	if len(out) == 0 && se.Message != "" {
		msg := se.Message
		if se.Code != "" {
			msg = se.Code + ": " + msg
		}
		out = append(out, msg)
	}
	return out
}

// messageLine writes one Redfish message as "MessageId: Message" (either
// alone where the other is missing; "" when both are).
func messageLine(id, msg string) string {
	switch {
	case id != "" && msg != "":
		return id + ": " + msg
	case msg != "":
		return msg
	}
	return id
}

// errorBody parses a Redfish error body ({"error": {...}}). It returns nil
// when b is not one.
func errorBody(b []byte) *schemas.Error {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return nil
	}
	raw, ok := top["error"]
	if !ok || len(top) > 2 { // an error body holds "error" and at most an @odata annotation
		return nil
	}
	var se schemas.Error
	if json.Unmarshal(raw, &se) != nil {
		return nil
	}
	return &se
}

// isCertError reports a TLS certificate that did not verify (never retried).
func isCertError(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}
