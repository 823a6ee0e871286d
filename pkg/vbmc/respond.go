package vbmc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// message is one Redfish message (Base registry) for an error body's
// @Message.ExtendedInfo.
type message struct {
	ID         string   `json:"MessageId"`
	Message    string   `json:"Message"`
	Args       []string `json:"MessageArgs"`
	Severity   string   `json:"Severity"`
	Resolution string   `json:"Resolution"`
}

// writeJSON writes a Redfish JSON body with the headers every answer has.
func writeJSON(w http.ResponseWriter, status int, body []byte, etag string) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("OData-Version", "4.0")
	h.Set("Cache-Control", "no-cache")
	if etag != "" {
		h.Set("ETag", etag)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError writes the Redfish error body (DSP0266 9.6.3).
func writeError(w http.ResponseWriter, status int, m message) {
	body, _ := json.MarshalIndent(errorBody(m), "", "  ")
	writeJSON(w, status, append(body, '\n'), "")
}

func errorBody(m message) map[string]any {
	info := map[string]any{
		"@odata.type": "#Message.v1_1_1.Message",
		"MessageId":   m.ID,
		"Message":     m.Message,
		"MessageArgs": m.Args,
		"Severity":    m.Severity,
		"Resolution":  m.Resolution,
	}
	if m.Args == nil {
		info["MessageArgs"] = []string{}
	}
	return map[string]any{"error": map[string]any{
		"code":                  "Base.1.0.GeneralError",
		"message":               "A general error has occurred. See ExtendedInfo for more information.",
		"@Message.ExtendedInfo": []any{info},
	}}
}

func msgMissing(uri string) message {
	return message{"Base.1.0.ResourceMissingAtURI", fmt.Sprintf("The resource at the URI %s was not found.", uri),
		[]string{uri}, "Critical", "Place a valid resource at the URI or correct the URI and resubmit the request."}
}

func msgNotAllowed(method, uri string) message {
	return message{"Base.1.0.OperationNotAllowed", fmt.Sprintf("The %s operation is not allowed on %s.", method, uri),
		[]string{method, uri}, "Critical", "Use an operation the resource supports."}
}

func msgUnauthorized() message {
	return message{"Base.1.0.NoValidSession", "There is no valid session established with the implementation.",
		nil, "Critical", "Establish a session (POST /redfish/v1/SessionService/Sessions) or send valid basic credentials."}
}

func msgMalformed(err error) message {
	return message{"Base.1.0.MalformedJSON", fmt.Sprintf("The request body submitted was malformed JSON: %v.", err),
		nil, "Critical", "Ensure that the request body is valid JSON and resubmit the request."}
}

func msgValueNotInList(value, prop string, allowed []string) message {
	return message{"Base.1.0.PropertyValueNotInList",
		fmt.Sprintf("The value %s for the property %s is not in the list of acceptable values (allowed: %s).",
			value, prop, strings.Join(allowed, ", ")),
		[]string{value, prop}, "Warning", "Choose a value from the enumeration list: " + strings.Join(allowed, ", ") + "."}
}

func msgPropertyUnknown(prop string) message {
	return message{"Base.1.0.PropertyUnknown", fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", prop),
		[]string{prop}, "Warning", "Remove the unknown property from the request body and resubmit the request if the operation failed."}
}

func msgPropertyNotWritable(prop string) message {
	return message{"Base.1.0.PropertyNotWritable", fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", prop),
		[]string{prop}, "Warning", "Remove the property from the request body and resubmit the request if the operation failed."}
}

func msgTypeError(value, prop string) message {
	return message{"Base.1.0.PropertyValueTypeError", fmt.Sprintf("The value %s for the property %s is of a different type than the property can accept.", value, prop),
		[]string{value, prop}, "Warning", "Correct the value for the property in the request body and resubmit the request if the operation failed."}
}

func msgMissingParam(param, action string) message {
	return message{"Base.1.0.ActionParameterMissing", fmt.Sprintf("The action %s requires the parameter %s to be present in the request body.", action, param),
		[]string{action, param}, "Critical", "Supply the action with the required parameter in the request body when the request is resubmitted."}
}

func msgActionNotSupported(action string) message {
	return message{"Base.1.0.ActionNotSupported", fmt.Sprintf("The action %s is not supported by the resource.", action),
		[]string{action}, "Critical", "The action supplied cannot be resubmitted to the implementation."}
}

func msgPrecondition(uri, got, want string) message {
	return message{"Base.1.0.PreconditionFailed",
		fmt.Sprintf("The ETag supplied did not match the ETag required to change this resource (%s: If-Match %s, current %s).", uri, got, want),
		[]string{uri}, "Critical", "Try the operation again using the appropriate ETag."}
}

func msgUnavailable() message {
	return message{"Base.1.0.ServiceTemporarilyUnavailable", "The service is temporarily unavailable. Retry in 1 seconds.",
		[]string{"1"}, "Critical", "Wait for the indicated retry duration and retry the operation."}
}

// msgSessionLimit is the refusal of a login beyond Config.MaxSessions,
// worded as iDRAC words it ("The maximum number of user sessions is
// reached.", RAC0218) under the Base registry's MessageId.
func msgSessionLimit(limit int) message {
	return message{"Base.1.0.SessionLimitExceeded",
		fmt.Sprintf("The maximum number of user sessions is reached (%d).", limit),
		[]string{strconv.Itoa(limit)}, "Critical", "Close one or more sessions before opening another session."}
}

func msgBusy(limit int) message {
	return message{"Base.1.0.ServiceTemporarilyUnavailable",
		fmt.Sprintf("The service is busy: more than %d requests at once. Retry in 1 seconds.", limit),
		[]string{"1"}, "Critical", "Send fewer requests at once; wait for the indicated retry duration and retry."}
}

func msgConflict(why string) message {
	return message{"Base.1.0.ResourceInStandby", why, nil, "Critical", "Change the power state of the system and resubmit the request."}
}

func msgInternal(err error) message {
	return message{"Base.1.0.InternalError", fmt.Sprintf("The request failed due to an internal service error: %v.", err),
		nil, "Critical", "Resubmit the request. If the problem persists, consider resetting the service."}
}

// readBody reads a JSON object body of at most 1 MiB.
func readBody(r *http.Request) (map[string]any, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return map[string]any{}, nil
	}
	return decodeDoc(b)
}

// recorder remembers the status for the request log line; Unwrap lets
// http.ResponseController reach the connection to drop it.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func msgOutOfRange(value, prop string) message {
	return message{"Base.1.0.PropertyValueOutOfRange", fmt.Sprintf("The value %s for the property %s is not in the supported range of acceptable values.", value, prop),
		[]string{value, prop}, "Warning", "Correct the value for the property in the request body and resubmit the request if the operation failed."}
}

// msgPasswordFormat refuses a new password without echoing it.
func msgPasswordFormat(rule string) message {
	return message{"Base.1.0.PropertyValueFormatError",
		fmt.Sprintf("The value for the property Password is of a different format than the property can accept: the AccountService requires %s.", rule),
		[]string{"(hidden)", "Password"}, "Warning", "Choose a password the AccountService's MinPasswordLength and MaxPasswordLength allow and resubmit the request."}
}
