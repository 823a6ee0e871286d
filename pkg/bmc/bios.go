package bmc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// biosDoc is the part of a Bios resource ingot reads. It is decoded from the
// raw JSON so the settings object (and its absence) is visible.
type biosDoc struct {
	raw        json.RawMessage // the resource as the BMC sent it (for quirk detection)
	ODataID    string          `json:"@odata.id"`
	Attributes map[string]any  `json:"Attributes"`
	Settings   *struct {
		SettingsObject struct {
			ODataID string `json:"@odata.id"`
		} `json:"SettingsObject"`
		SupportedApplyTimes []string `json:"SupportedApplyTimes"`
	} `json:"@Redfish.Settings"`
}

// getJSON GETs uri and decodes it (numbers as json.Number) into v; it
// returns the ETag.
func getJSON(api schemas.Client, uri string, v any) (string, error) {
	resp, err := api.Get(uri)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return "", fmt.Errorf("decoding %s: %w", uri, err)
	}
	return resp.Header.Get("ETag"), nil
}

// decodeNumbers decodes b into v, numbers as json.Number.
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// link reads {"key": {"@odata.id": ...}} from a resource's raw JSON.
func link(raw []byte, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var l struct {
		ID string `json:"@odata.id"`
	}
	if json.Unmarshal(m[key], &l) != nil {
		return ""
	}
	return l.ID
}

// hasBootProperty reports whether a System's Boot object has the property
// (HPE Cray EX has Boot with only BootOrder: no BootSourceOverrideTarget).
func hasBootProperty(raw []byte, name string) bool {
	var m struct {
		Boot map[string]json.RawMessage `json:"Boot"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	_, ok := m.Boot[name]
	return ok
}

// bios fetches the system's Bios resource.
func (c *Client) bios(ctx context.Context, op string) (*gofish.APIClient, biosDoc, string, error) {
	var doc biosDoc
	sys, err := c.system(ctx)
	if err != nil {
		return nil, doc, "", c.wrap(op, err)
	}
	uri := link(sys.RawData, "Bios")
	if uri == "" {
		return nil, doc, "", &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op,
			Err: fmt.Errorf("system %s has no Bios resource", sys.ODataID)}
	}
	api, err := c.gf(ctx)
	if err != nil {
		return nil, doc, "", err
	}
	etag, err := getJSON(api, uri, &doc.raw)
	if err == nil {
		if jerr := decodeNumbers(doc.raw, &doc); jerr != nil {
			err = &Error{Kind: KindBadResponse, Endpoint: c.cfg.Endpoint, Err: fmt.Errorf("decoding %s: %w", uri, jerr)}
		}
	}
	if err == nil && doc.Attributes == nil {
		err = &Error{Kind: KindBadResponse, Endpoint: c.cfg.Endpoint, Err: fmt.Errorf("%s has no Attributes", uri)}
	}
	if doc.ODataID == "" {
		doc.ODataID = uri
	}
	return api, doc, etag, c.wrap(op, err)
}

// Attributes returns the BIOS attributes now in effect. Numbers are
// json.Number.
func (c *Client) Attributes(ctx context.Context) (map[string]any, error) {
	_, doc, _, err := c.bios(ctx, "reading BIOS attributes")
	return doc.Attributes, err
}

// ApplyResult says how ApplyBIOS staged the attributes.
type ApplyResult struct {
	Target   string   `json:"target"`             // the URI PATCHed
	Changed  []string `json:"changed,omitempty"`  // attributes sent (those already at the wanted value are not)
	Fallback string   `json:"fallback,omitempty"` // the vendor fallback used, if any
	// Pending is true: BIOS attributes take effect at the next reset; call
	// VerifyBIOS after it.
	Pending bool `json:"pending"`
}

// ApplyBIOS stages attrs through the Bios settings object (applied by the
// BIOS at the next reset). Attributes the BIOS does not have are refused
// before anything is sent.
func (c *Client) ApplyBIOS(ctx context.Context, attrs map[string]any) (ApplyResult, error) {
	const op = "applying BIOS attributes"
	api, doc, etag, err := c.bios(ctx, op)
	if err != nil {
		return ApplyResult{}, err
	}
	var unknown []string
	for k := range attrs {
		if _, ok := doc.Attributes[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return ApplyResult{}, &Error{Kind: KindInvalid, Endpoint: c.cfg.Endpoint, Op: op,
			Err: fmt.Errorf("the BIOS at %s has no attribute %v (it has %d attributes)", doc.ODataID, unknown, len(doc.Attributes))}
	}
	res := ApplyResult{Target: doc.ODataID, Pending: true}
	current, etag, err := c.biosTarget(ctx, api, doc, etag, &res)
	if err != nil {
		return res, c.wrap(op+": reading the settings object", err)
	}
	payload := map[string]any{}
	for k, v := range attrs {
		if !valueEqual(attrValue(current[k]), v) {
			payload[k] = v
		}
	}
	res.Changed = slices.Sorted(maps.Keys(payload))
	if len(payload) == 0 {
		return res, nil
	}
	hdr := map[string]string{}
	if etag != "" {
		hdr["If-Match"] = etag
	}
	resp, err := api.PatchWithHeaders(res.Target, map[string]any{"Attributes": payload}, hdr)
	var be *Error
	if etag != "" && errors.As(err, &be) && c.quirk(ctx, QuirkBIOSIfMatch412, facts{status: be.Status}) {
		// Dell iDRAC rejects If-Match on BIOS settings.
		resp, err = api.PatchWithHeaders(res.Target, map[string]any{"Attributes": payload}, nil)
	}
	closeBody(resp)
	return res, c.wrap(fmt.Sprintf("%s: PATCH %s", op, res.Target), err)
}

// biosTarget chooses where ApplyBIOS PATCHes (res.Target) and returns the
// attributes that count as current there and the ETag to send.
func (c *Client) biosTarget(ctx context.Context, api *gofish.APIClient, doc biosDoc, etag string, res *ApplyResult) (map[string]any, string, error) {
	switch {
	case c.quirk(ctx, QuirkBIOSNoSettings, facts{resource: doc.raw}):
		// HPE Cray EX (and other BMCs without @Redfish.Settings): PATCH /Bios.
		res.Fallback = "HPE Cray EX: no @Redfish.Settings; PATCH of the Bios resource, applied at reset"
		return doc.Attributes, etag, nil
	case c.quirk(ctx, QuirkBIOSNoSettingsObj, facts{resource: doc.raw}):
		// AMI MegaRAC (GIGABYTE H262-Z63 fw 12.84): @Redfish.Settings without
		// a SettingsObject; the BMC stages a PATCH of /Bios for the next reset.
		res.Fallback = "AMI MegaRAC: @Redfish.Settings has no SettingsObject; PATCH of the Bios resource, applied at reset"
		return doc.Attributes, etag, nil
	}
	// The standard path: PATCH the settings object, compared with what it
	// already stages.
	res.Target = doc.Settings.SettingsObject.ODataID
	var sd biosDoc
	var sraw json.RawMessage
	setag, err := getJSON(api, res.Target, &sraw)
	var be *Error
	if err != nil && errors.As(err, &be) && c.quirk(ctx, QuirkAMIFutureState, facts{status: be.Status}) {
		// AMI: the settings object exists only while something is pending;
		// nothing is, and the PATCH carries the Bios resource's ETag.
		res.Fallback = "AMI MegaRAC: the settings object exists only while changes are pending; PATCH with the Bios ETag"
		return doc.Attributes, etag, nil
	}
	if err != nil {
		return nil, "", err
	}
	if err := decodeNumbers(sraw, &sd); err != nil {
		return nil, "", fmt.Errorf("decoding %s: %w", res.Target, err)
	}
	if c.quirk(ctx, QuirkAMIFutureState, facts{resource: sraw}) {
		res.Fallback = "AMI MegaRAC: @Redfish.FutureState settings object (pending attributes only)"
	}
	current := maps.Clone(doc.Attributes)
	maps.Copy(current, sd.Attributes)
	return current, setag, nil
}

// Mismatch is one BIOS attribute that does not have the wanted value.
type Mismatch struct {
	Name    string `json:"name"`
	Want    any    `json:"want"`
	Got     any    `json:"got"`
	Missing bool   `json:"missing,omitempty"` // the BIOS has no such attribute
}

func (m Mismatch) String() string {
	if m.Missing {
		return fmt.Sprintf("%s: the BIOS has no such attribute (want %v)", m.Name, m.Want)
	}
	return fmt.Sprintf("%s: want %v, BIOS has %v", m.Name, m.Want, m.Got)
}

// VerifyBIOS compares the attributes in effect with want (call it after the
// reset that applies ApplyBIOS) and returns each that did not stick.
func (c *Client) VerifyBIOS(ctx context.Context, want map[string]any) ([]Mismatch, error) {
	_, doc, _, err := c.bios(ctx, "verifying BIOS attributes")
	if err != nil {
		return nil, err
	}
	return compareAttributes(doc.Attributes, want), nil
}

// compareAttributes lists the attributes of want that have another value
// (or none) in have, sorted by name.
func compareAttributes(have, want map[string]any) []Mismatch {
	var out []Mismatch
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := have[k]
		switch {
		case !ok:
			out = append(out, Mismatch{Name: k, Want: want[k], Missing: true})
		case !valueEqual(attrValue(got), want[k]):
			out = append(out, Mismatch{Name: k, Want: want[k], Got: attrValue(got)})
		}
	}
	return out
}

// attrValue is an attribute's value. Vendor fallback — HPE Cray EX: each
// attribute is an object whose value is its "current_value" member.
func attrValue(v any) any {
	if m, ok := v.(map[string]any); ok {
		if cv, ok := m["current_value"]; ok {
			return cv
		}
	}
	return v
}

// valueEqual compares BIOS values: numbers by value whatever their Go type
// (json.Number, float64, int64), everything else exactly. "1" is not 1.
func valueEqual(a, b any) bool {
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum || bNum {
		return aNum && bNum && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

var errNoMedia = errors.New("no virtual media slot")
