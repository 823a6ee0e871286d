package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish"
)

// UpdateService is what a BMC offers for firmware updates (Redfish
// UpdateService), and its firmware inventory.
type UpdateService struct {
	URI string `json:"uri"`
	// SimpleUpdate is the SimpleUpdate action's target: the BMC fetches
	// the image from an ImageURI. "" when the BMC has none.
	SimpleUpdate string `json:"simple_update,omitempty"`
	// TransferProtocols the SimpleUpdate action allows (HTTP, HTTPS ...),
	// from the action or its ActionInfo; empty: the BMC does not say.
	TransferProtocols []string `json:"transfer_protocols,omitempty"`
	// TransferProtocolRequired: the ActionInfo marks TransferProtocol
	// required (HPE Cray, AMI).
	TransferProtocolRequired bool `json:"transfer_protocol_required,omitempty"`
	// AllowedTargets are SimpleUpdate's Targets AllowableValues
	// (QuirkUpdateTargetsList); empty: any.
	AllowedTargets []string `json:"allowed_targets,omitempty"`
	// UpdateComponents are the AMI OEM UpdateComponent values
	// (QuirkAMIUpdateComponent).
	UpdateComponents []string `json:"update_components,omitempty"`
	// MultipartPushURI takes a multipart/form-data push (UpdateParameters
	// + UpdateFile); PushURI a raw image POST (deprecated in Redfish).
	MultipartPushURI string   `json:"multipart_push_uri,omitempty"`
	PushURI          string   `json:"push_uri,omitempty"`
	ApplyTimes       []string `json:"apply_times,omitempty"` // what @Redfish.OperationApplyTime may say
	// Rollback is an OEM action that restores the previous image, where
	// the BMC keeps one ("" when it offers none; see Rollback).
	Rollback string         `json:"rollback,omitempty"`
	Items    []FirmwareItem `json:"items"`
}

// FirmwareItem is one UpdateService/FirmwareInventory entry.
type FirmwareItem struct {
	URI         string `json:"uri"`       // what Targets name
	ID          string `json:"id"`        // the Redfish Id: a number on HPE iLO, never used to match a pin
	Name        string `json:"name"`      // the resource's Name
	Component   string `json:"component"` // normalised name: Name, told apart where several share it ("NVIDIA A40 (PCI-E Slot 1)")
	Description string `json:"description,omitempty"`
	Context     string `json:"context,omitempty"` // where it sits (HPE DeviceContext "PCI-E Slot 1")
	Version     string `json:"version"`
	Updateable  bool   `json:"updateable"`
	// SHA256 is the BMC's SHA-256 measurement of the running image, where
	// it reports one (Measurement with TPM_ALG_SHA256); "" otherwise.
	SHA256       string   `json:"sha256,omitempty"`
	Manufacturer string   `json:"manufacturer,omitempty"`
	SoftwareID   string   `json:"software_id,omitempty"`
	Related      []string `json:"related,omitempty"` // RelatedItem links (the Processor, Manager or System it belongs to)
}

// itemDoc is the part of a SoftwareInventory read raw.
type itemDoc struct {
	ID           string `json:"@odata.id"`
	Description  string `json:"Description"`
	Manufacturer string `json:"Manufacturer"`
	SoftwareID   string `json:"SoftwareId"`
	Updateable   *bool  `json:"Updateable"`
	RelatedItem  []struct {
		ID string `json:"@odata.id"`
	} `json:"RelatedItem"`
	Measurement struct {
		Measurement string `json:"Measurement"`
		Algorithm   string `json:"MeasurementHashAlgorithm"`
	} `json:"Measurement"`
}

// item fills the raw-read fields of a firmware entry.
func (it *firmwareItem) fill(raw []byte) {
	var d itemDoc
	if json.Unmarshal(raw, &d) != nil {
		return
	}
	it.uri, it.description, it.manufacturer, it.softwareID = d.ID, strings.TrimSpace(d.Description), d.Manufacturer, d.SoftwareID
	it.updateable = d.Updateable == nil || *d.Updateable
	for _, r := range d.RelatedItem {
		it.related = append(it.related, r.ID)
	}
	if strings.Contains(strings.ToUpper(d.Measurement.Algorithm), "SHA256") && len(d.Measurement.Measurement) == 64 {
		it.sha256 = strings.ToLower(d.Measurement.Measurement)
	}
}

func (it firmwareItem) export() FirmwareItem {
	return FirmwareItem{URI: it.uri, ID: it.id, Name: it.name, Component: it.component, Description: it.description,
		Context: it.context, Version: it.version, Updateable: it.updateable, SHA256: it.sha256,
		Manufacturer: it.manufacturer, SoftwareID: it.softwareID, Related: it.related}
}

// updateDoc is the part of an UpdateService read raw.
type updateDoc struct {
	ID               string `json:"@odata.id"`
	MultipartPushURI string `json:"MultipartHttpPushUri"`
	PushURI          string `json:"HttpPushUri"`
	PushOptions      struct {
		ApplyTime struct {
			Allowed []string `json:"ApplyTime@Redfish.AllowableValues"`
		} `json:"HttpPushUriApplyTime"`
	} `json:"HttpPushUriOptions"`
	Actions struct {
		SimpleUpdate struct {
			Target    string   `json:"target"`
			Info      string   `json:"@Redfish.ActionInfo"`
			Protocols []string `json:"TransferProtocol@Redfish.AllowableValues"`
		} `json:"#UpdateService.SimpleUpdate"`
		Oem map[string]struct {
			Target string `json:"target"`
		} `json:"Oem"`
	} `json:"Actions"`
}

// actionInfo is a Redfish ActionInfo.
type actionInfo struct {
	Parameters []struct {
		Name     string   `json:"Name"`
		Required bool     `json:"Required"`
		Allowed  []string `json:"AllowableValues"`
	} `json:"Parameters"`
}

// UpdateService reads the BMC's UpdateService, the SimpleUpdate
// ActionInfo where it has one, and the firmware inventory.
func (c *Client) UpdateService(ctx context.Context) (UpdateService, error) {
	const op = "reading the UpdateService"
	api, err := c.gf(ctx)
	if err != nil {
		return UpdateService{}, err
	}
	us, err := api.Service.UpdateService()
	switch {
	case err != nil:
		return UpdateService{}, c.wrap(op, err)
	case us == nil:
		return UpdateService{}, &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op,
			Err: errors.New("the service root links no UpdateService: this BMC offers no Redfish firmware update")}
	}
	out, info, err := parseUpdateService(us.ODataID, us.RawData)
	if err != nil {
		return UpdateService{}, c.wrap(op, err)
	}
	if info != "" {
		if err := c.readActionInfo(ctx, api, info, &out); err != nil {
			return out, c.wrap(op+": reading "+info, err)
		}
	}
	r := &reading{}
	for _, it := range c.readFirmware(api, r) {
		out.Items = append(out.Items, it.export())
	}
	if len(out.Items) == 0 && len(r.problems) > 0 {
		return out, &Error{Kind: KindBadResponse, Endpoint: c.cfg.Endpoint, Op: op + ": reading the firmware inventory",
			Err: errors.New(r.problems[0].Part + ": " + r.problems[0].Detail)}
	}
	return out, nil
}

// parseUpdateService reads an UpdateService resource; info is its
// SimpleUpdate ActionInfo's URI ("" when none).
func parseUpdateService(uri string, raw []byte) (out UpdateService, info string, err error) {
	var doc updateDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return out, "", fmt.Errorf("decoding the UpdateService: %w", err)
	}
	out = UpdateService{URI: cmpOr(doc.ID, uri), SimpleUpdate: doc.Actions.SimpleUpdate.Target,
		TransferProtocols: doc.Actions.SimpleUpdate.Protocols, MultipartPushURI: doc.MultipartPushURI, PushURI: doc.PushURI,
		ApplyTimes: doc.PushOptions.ApplyTime.Allowed}
	for _, name := range slices.Sorted(maps.Keys(doc.Actions.Oem)) {
		if strings.Contains(strings.ToLower(name), "rollback") {
			out.Rollback = doc.Actions.Oem[name].Target
		}
	}
	return out, doc.Actions.SimpleUpdate.Info, nil
}

// readActionInfo adds what SimpleUpdate's ActionInfo says.
func (c *Client) readActionInfo(ctx context.Context, api *gofish.APIClient, uri string, out *UpdateService) error {
	var raw json.RawMessage
	if _, err := getJSON(api, uri, &raw); err != nil {
		return err
	}
	var info actionInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	for _, p := range info.Parameters {
		switch p.Name {
		case "TransferProtocol":
			if len(p.Allowed) > 0 {
				out.TransferProtocols = p.Allowed
			}
			out.TransferProtocolRequired = p.Required
		case "Targets":
			if c.quirk(ctx, QuirkUpdateTargetsList, facts{resource: raw}) {
				out.AllowedTargets = p.Allowed
			}
		case "UpdateComponent":
			if c.quirk(ctx, QuirkAMIUpdateComponent, facts{resource: raw}) {
				out.UpdateComponents = p.Allowed
			}
		}
	}
	return nil
}

// FirmwareItems lists the firmware inventory with each entry's URI,
// normalised name and version.
func (c *Client) FirmwareItems(ctx context.Context) ([]FirmwareItem, error) {
	us, err := c.UpdateService(ctx)
	return us.Items, err
}

// Methods of starting an update.
const (
	MethodSimpleUpdate  = "simple-update"  // SimpleUpdate with an ImageURI the BMC fetches
	MethodMultipartPush = "multipart-push" // POST multipart/form-data to MultipartHttpPushUri
	MethodHTTPPush      = "http-push"      // POST the image to HttpPushUri
)

// chooseMethod picks how to start an update: SimpleUpdate where the BMC
// has it and the caller gives an ImageURI of a protocol it allows, else a
// multipart push, else a plain push. want forces one ("" any).
func (us UpdateService) chooseMethod(req UpdateRequest) (string, error) {
	scheme := ""
	if u, err := url.Parse(req.ImageURI); err == nil {
		scheme = strings.ToUpper(u.Scheme)
	}
	simple := us.SimpleUpdate != "" && req.ImageURI != "" &&
		(len(us.TransferProtocols) == 0 || slices.Contains(us.TransferProtocols, scheme))
	canPush := req.Image != nil
	for _, m := range []struct {
		name string
		ok   bool
	}{{MethodSimpleUpdate, simple}, {MethodMultipartPush, canPush && us.MultipartPushURI != ""},
		{MethodHTTPPush, canPush && us.PushURI != ""}} {
		if m.ok && (req.Method == "" || req.Method == m.name) {
			return m.name, nil
		}
	}
	return "", fmt.Errorf("no way to start this update: the BMC offers SimpleUpdate %q (protocols %v), MultipartHttpPushUri %q, "+
		"HttpPushUri %q; the request has an ImageURI %q, an image to push: %v, method %q",
		us.SimpleUpdate, us.TransferProtocols, us.MultipartPushURI, us.PushURI, req.ImageURI, canPush, req.Method)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// FirmwareItem reads one FirmwareInventory entry (its version now): one
// GET, where UpdateService reads the whole inventory. Component is the
// entry's Name (telling apart entries that share a name needs them all).
func (c *Client) FirmwareItem(ctx context.Context, uri string) (FirmwareItem, error) {
	op := "reading firmware " + uri
	api, err := c.gf(ctx)
	if err != nil {
		return FirmwareItem{}, err
	}
	var raw json.RawMessage
	if _, err := getJSON(api, uri, &raw); err != nil {
		return FirmwareItem{}, c.wrap(op, err)
	}
	var d struct {
		ID      string `json:"Id"`
		Name    string `json:"Name"`
		Version string `json:"Version"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return FirmwareItem{}, c.wrap(op, err)
	}
	it := firmwareItem{id: d.ID, name: strings.TrimSpace(d.Name), version: d.Version, context: hpeDeviceContext(raw)}
	it.fill(raw)
	it.component = firstNonEmpty(it.name, it.id)
	if it.uri == "" {
		it.uri = uri
	}
	return it.export(), nil
}
