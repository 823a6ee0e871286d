package bmc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish"
)

// UpdateRequest says what to flash and how.
type UpdateRequest struct {
	// ImageURI is where the BMC fetches the image for SimpleUpdate (an
	// http or https URL it can reach).
	ImageURI string
	// Image opens the image for a push (MultipartHttpPushUri or
	// HttpPushUri); nil when only SimpleUpdate is wanted.
	Image func() (io.ReadCloser, error)
	// ImageName is the file name a push gives the image.
	ImageName string
	// Targets are FirmwareInventory URIs; empty: the BMC decides from the
	// image (what most BMCs do with a bundle).
	Targets []string
	// ApplyTime is the Redfish OperationApplyTime to ask for (Immediate,
	// OnReset); "" asks for nothing.
	ApplyTime string
	// Method forces one way (MethodSimpleUpdate ...); "" picks (see
	// UpdateService.chooseMethod).
	Method string
}

// UpdateStart is what the BMC answered to the start of an update.
type UpdateStart struct {
	Method string `json:"method"`
	// Monitor is the task monitor (the 202's Location); Task the Task
	// resource when the BMC names it. Both "" when the BMC finished at once.
	Monitor  string   `json:"monitor,omitempty"`
	Task     string   `json:"task,omitempty"`
	Status   int      `json:"status"`
	Messages []string `json:"messages,omitempty"`
}

// StartUpdate starts one firmware update the way the BMC offers and
// returns where to follow it. It is never retried once it may have
// reached the BMC (a second start would flash twice); a refused
// connection or an answer of 5xx/409/429 (nothing started) is.
func (c *Client) StartUpdate(ctx context.Context, us UpdateService, req UpdateRequest) (UpdateStart, error) {
	method, err := us.chooseMethod(req)
	if err != nil {
		return UpdateStart{}, &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: "starting a firmware update", Err: err}
	}
	op := "starting a firmware update (" + method + ")"
	if err := us.checkTargets(req.Targets); err != nil {
		return UpdateStart{}, &Error{Kind: KindInvalid, Endpoint: c.cfg.Endpoint, Op: op, Err: err}
	}
	api, err := c.gf(context.WithValue(ctx, postKey{}, true))
	if err != nil {
		return UpdateStart{}, err
	}
	var resp *http.Response
	switch method {
	case MethodSimpleUpdate:
		resp, err = api.Post(us.SimpleUpdate, c.simpleUpdateBody(ctx, us, req))
	case MethodMultipartPush:
		resp, err = c.push(api, us.MultipartPushURI, req, true)
	default:
		if len(req.Targets) > 0 {
			var presp *http.Response
			presp, err = api.Patch(us.URI, map[string]any{"HttpPushUriTargets": req.Targets})
			closeBody(presp)
			if err != nil {
				return UpdateStart{}, c.wrap(op+": setting HttpPushUriTargets", err)
			}
		}
		resp, err = c.push(api, us.PushURI, req, false)
	}
	if err != nil {
		return UpdateStart{Method: method}, c.wrap(op, err)
	}
	defer closeBody(resp)
	return startAnswer(method, resp), nil
}

// checkTargets refuses targets a BMC with an allowable list does not list
// (QuirkUpdateTargetsList).
func (us UpdateService) checkTargets(targets []string) error {
	if len(us.AllowedTargets) == 0 {
		return nil
	}
	for _, t := range targets {
		if !slices.Contains(us.AllowedTargets, t) {
			return fmt.Errorf("target %s is not one SimpleUpdate may update on this BMC (Targets@Redfish.AllowableValues: %v)", t, us.AllowedTargets)
		}
	}
	return nil
}

// simpleUpdateBody is the SimpleUpdate payload.
func (c *Client) simpleUpdateBody(ctx context.Context, us UpdateService, req UpdateRequest) map[string]any {
	body := map[string]any{"ImageURI": req.ImageURI}
	if u, err := url.Parse(req.ImageURI); err == nil && (len(us.TransferProtocols) > 0 || us.TransferProtocolRequired) {
		body["TransferProtocol"] = strings.ToUpper(u.Scheme)
	}
	if len(req.Targets) > 0 {
		body["Targets"] = req.Targets
	}
	if req.ApplyTime != "" {
		body["@Redfish.OperationApplyTime"] = req.ApplyTime
	}
	if len(us.UpdateComponents) > 0 && len(req.Targets) == 1 {
		// AMI MegaRAC: UpdateComponent, not Targets, chooses what is flashed.
		if comp := updateComponent(us.UpdateComponents, path.Base(req.Targets[0])); comp != "" &&
			c.quirk(ctx, QuirkAMIUpdateComponent, facts{resource: []byte(`"UpdateComponent"`)}) {
			body["UpdateComponent"] = comp
			delete(body, "Targets")
		}
	}
	return body
}

// updateComponent is the AMI UpdateComponent value for a FirmwareInventory
// Id: the allowed value it equals, else the longest it starts with
// (MB_CPLD1 -> MB_CPLD).
func updateComponent(allowed []string, id string) string {
	best := ""
	for _, a := range allowed {
		if strings.EqualFold(a, id) {
			return a
		}
		if strings.HasPrefix(strings.ToUpper(id), strings.ToUpper(a)) && len(a) > len(best) {
			best = a
		}
	}
	return best
}

// push POSTs the image: multipart (UpdateParameters, then UpdateFile) or
// the raw image.
func (c *Client) push(api *gofish.APIClient, uri string, req UpdateRequest, multi bool) (*http.Response, error) {
	img, err := req.Image()
	if err != nil {
		return nil, fmt.Errorf("opening the image: %w", err)
	}
	defer img.Close()
	if !multi {
		b, err := io.ReadAll(img)
		if err != nil {
			return nil, fmt.Errorf("reading the image: %w", err)
		}
		return api.RunRawRequestWithHeaders(http.MethodPost, uri, bytes.NewReader(b), "application/octet-stream", nil)
	}
	params := map[string]any{}
	if len(req.Targets) > 0 {
		params["Targets"] = req.Targets
	}
	if req.ApplyTime != "" {
		params["@Redfish.OperationApplyTime"] = req.ApplyTime
	}
	body, ctype, err := multipartBody(params, cmpOr(req.ImageName, "firmware.bin"), img)
	if err != nil {
		return nil, err
	}
	return api.RunRawRequestWithHeaders(http.MethodPost, uri, bytes.NewReader(body), ctype, nil)
}

// multipartBody builds the Redfish multipart push (DSP0266 "Multipart HTTP
// push updates"): the UpdateParameters JSON part first, then UpdateFile.
func multipartBody(params map[string]any, name string, img io.Reader) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="UpdateParameters"`)
	h.Set("Content-Type", "application/json")
	pw, err := w.CreatePart(h)
	if err == nil {
		err = json.NewEncoder(pw).Encode(params)
	}
	if err != nil {
		return nil, "", err
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="UpdateFile"; filename=%q`, name))
	h.Set("Content-Type", "application/octet-stream")
	fw, err := w.CreatePart(h)
	if err == nil {
		_, err = io.Copy(fw, img)
	}
	if err == nil {
		err = w.Close()
	}
	return buf.Bytes(), w.FormDataContentType(), err
}

// startAnswer reads the answer to a start: 202 and a Location (a task
// monitor, or the Task itself), a Task in the body, or done at once.
func startAnswer(method string, resp *http.Response) UpdateStart {
	out := UpdateStart{Method: method, Status: resp.StatusCode}
	loc := resp.Header.Get("Location")
	if u, err := url.Parse(loc); err == nil && u.Path != "" {
		loc = u.RequestURI()
	}
	out.Monitor = loc
	body, _ := io.ReadAll(resp.Body)
	var t taskDoc
	if json.Unmarshal(body, &t) == nil {
		if t.TaskState != "" || strings.Contains(t.Type, "#Task.") {
			out.Task = t.ID
		}
		out.Messages = t.messages()
	}
	if out.Task == "" && strings.Contains(loc, "/Tasks/") && !strings.HasSuffix(strings.TrimSuffix(loc, "/"), "/Monitor") {
		out.Task = loc
	}
	return out
}
