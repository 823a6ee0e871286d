package bmc

import (
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/stmcginnis/gofish"
)

// Quirk names one known deviation of a BMC from the Redfish standard.
// quirkTable is the one list of them: each entry says which vendor does
// what, how it is detected from what the BMC says (its identity, a missing
// property, a status code or message), and what ingot does about it. The
// handling sits in one labelled branch (c.quirk(...)) at the one place the
// deviation matters; every entry has a test on a mockup fragment
// (quirks_test.go). A deviation no entry knows ends in an *Error that names
// the request (method and path), the HTTP status and the BMC's messages.
type Quirk string

// The known deviations.
const (
	QuirkErrorBody200        Quirk = "error-body-http-200"
	QuirkMessageOnly         Quirk = "error-message-without-extended-info"
	QuirkRedirect            Quirk = "redirect"
	QuirkNumericFirmwareIDs  Quirk = "numeric-firmware-ids"
	QuirkBootModeBIOS        Quirk = "boot-mode-bios-attribute"
	QuirkSupermicroBootMode  Quirk = "supermicro-boot-mode-not-advertised"
	QuirkILONoneTarget       Quirk = "ilo-boot-target-none-refused"
	QuirkBootSettingsIfMatch Quirk = "boot-override-settings-if-match"
	QuirkBIOSNoSettingsObj   Quirk = "bios-settings-without-object"
	QuirkBIOSNoSettings      Quirk = "bios-without-settings"
	QuirkBIOSIfMatch412      Quirk = "bios-if-match-refused"
	QuirkBIOSCurrentValue    Quirk = "bios-attribute-objects"
	QuirkAMIFutureState      Quirk = "ami-future-state-settings"
	QuirkIDRAC10Media        Quirk = "idrac10-virtual-media"
	QuirkAMIUpdateComponent  Quirk = "ami-update-component"
	QuirkUpdateTargetsList   Quirk = "simple-update-allowable-targets"
)

// QuirkInfo documents one deviation (Quirks lists them for people).
type QuirkInfo struct {
	Name      Quirk  `json:"name"`
	Vendor    string `json:"vendor"`
	Behaviour string `json:"behaviour"`
	Detection string `json:"detection"`
	Handling  string `json:"handling"`
}

// facts is what a detector may look at: the BMC's identity (read once per
// client) and what the call site has in hand.
type facts struct {
	id       identity
	resource []byte   // the resource the call acts on (a System, a Bios, an ActionInfo ...)
	status   int      // the answer's HTTP status, 0 when none yet
	messages []string // the answer's Redfish messages
}

type quirkSpec struct {
	QuirkInfo
	detect func(f facts) bool
}

// quirkTable is the library of known deviations.
func quirkTable() []quirkSpec {
	return []quirkSpec{
		{QuirkInfo{QuirkErrorBody200, "several captured BMCs (csm-redfish-interface-emulator captures)",
			"answer a GET with HTTP 200 and an empty body or a Redfish error body",
			"an empty 200 body, or one holding only \"error\"", "KindBadResponse with the body's messages (transport.go checker)"},
			func(f facts) bool { return f.status == 200 }},
		{QuirkInfo{QuirkMessageOnly, "several (AMI MegaRAC, OpenBMC builds)",
			"put the reason in error.message only, without @Message.ExtendedInfo",
			"an error body without ExtendedInfo", "the message (with its code) becomes the error's message (errors.go redfishMessages)"},
			func(f facts) bool { return len(f.messages) == 0 }},
		{QuirkInfo{QuirkRedirect, "BMCs whose web server moves Redfish paths (a trailing slash added, http to https)",
			"answer a Redfish URL with 301, 302, 307 or 308; net/http would turn a redirected POST or PATCH into a GET and lose the action",
			"a 3xx answer with a Location", "the same method and body are sent to the Location on the same scheme and host (at most 5 hops); a redirect elsewhere is an error naming it (redirect.go)"},
			func(f facts) bool { return f.status >= 300 && f.status < 400 }},
		{QuirkInfo{QuirkNumericFirmwareIDs, "HPE iLO 5",
			"numbers its FirmwareInventory entries (Id 1, 2, 3 ...) and gives four GPUs the same Name",
			"an all-digit Id", "entries are named by Name, told apart by Oem.Hpe.DeviceContext, never by Id (normalize.go nameFirmware)"},
			func(f facts) bool { return numericID.Match(f.resource) }},
		{QuirkInfo{QuirkBootModeBIOS, "Dell iDRAC, HPE iLO (some firmware)",
			"the System's Boot has no BootSourceOverrideMode; the mode is the BIOS attribute BootMode (Uefi, Bios/LegacyBios)",
			"Boot without BootSourceOverrideMode on a BMC that is not Supermicro", "SetBootMode stages the BootMode attribute for the next reset (boot.go)"},
			func(f facts) bool {
				return !hasBootProperty(f.resource, "BootSourceOverrideMode") && !f.id.is("supermicro")
			}},
		{QuirkInfo{QuirkSupermicroBootMode, "Supermicro (X11, X12, H12 BMC firmware)",
			"does not advertise Boot.BootSourceOverrideMode, yet takes it in a PATCH, and sets a one-time override to Legacy when a PATCH of the target omits it",
			"vendor Supermicro and Boot without BootSourceOverrideMode", "SetBootOverride sends BootSourceOverrideMode UEFI with the target; SetBootMode PATCHes the mode (boot.go)"},
			func(f facts) bool {
				return f.id.is("supermicro") && !hasBootProperty(f.resource, "BootSourceOverrideMode")
			}},
		{QuirkInfo{QuirkILONoneTarget, "HPE iLO 4 and 5",
			"refuses BootSourceOverrideTarget None (HTTP 400) although it lists None among the allowable values",
			"vendor HPE", "clearing an override sends BootSourceOverrideEnabled Disabled alone (boot.go ClearBootOverride)"},
			func(f facts) bool { return f.id.is("hpe") }},
		{QuirkInfo{QuirkBootSettingsIfMatch, "Dell iDRAC 10",
			"the System's Boot is read-only (PATCH answered 400 PropertyNotWritable or 405); the override is PATCHed to the System's @Redfish.Settings object, which requires If-Match (428 without)",
			"a refused PATCH of the System that has a SettingsObject", "PATCH of the settings object with If-Match of its ETag header, or its @odata.etag where the header is missing (boot.go patchBoot)"},
			func(f facts) bool {
				return settingsObject(f.resource) != "" && (f.status == 400 || f.status == 403 || f.status == 405)
			}},
		{QuirkInfo{QuirkBIOSNoSettingsObj, "AMI MegaRAC (GIGABYTE H262-Z63 BMC 12.84)",
			"has @Redfish.Settings on the Bios resource but no SettingsObject; a PATCH of Bios itself is staged for the next reset",
			"@Redfish.Settings without SettingsObject", "ApplyBIOS PATCHes the Bios resource (bios.go)"},
			func(f facts) bool { return hasSettings(f.resource) && settingsObject(f.resource) == "" }},
		{QuirkInfo{QuirkBIOSNoSettings, "HPE Cray EX",
			"no @Redfish.Settings on the Bios resource", "Bios without @Redfish.Settings", "ApplyBIOS PATCHes the Bios resource (bios.go)"},
			func(f facts) bool { return !hasSettings(f.resource) }},
		{QuirkInfo{QuirkBIOSIfMatch412, "Dell iDRAC",
			"refuses If-Match on the BIOS settings object (412 PreconditionFailed) even with the current ETag",
			"412 on a PATCH sent with If-Match", "the PATCH is sent again without If-Match, once (bios.go)"},
			func(f facts) bool { return f.status == 412 }},
		{QuirkInfo{QuirkBIOSCurrentValue, "HPE Cray EX",
			"gives each BIOS attribute as an object whose value is its current_value member",
			"attribute objects with current_value", "values are compared by current_value (bios.go attrValue)"},
			func(f facts) bool { return strings.Contains(string(f.resource), `"current_value"`) }},
		{QuirkInfo{QuirkAMIFutureState, "AMI MegaRAC (SettingsObject Bios/SD)",
			"the settings object exists only while a change is pending: a GET answers 404 until then, and then holds only the pending attributes with @Redfish.FutureState; its PATCH wants If-Match",
			"404 on the GET of a SettingsObject", "nothing pending is assumed; the PATCH carries the Bios resource's ETag (bios.go)"},
			func(f facts) bool {
				return f.status == 404 || strings.Contains(string(f.resource), "@Redfish.FutureState")
			}},
		{QuirkInfo{QuirkIDRAC10Media, "Dell iDRAC 10",
			"keeps virtual media under the System only, and its InsertMedia refuses the Inserted and WriteProtected parameters (400 ActionParameterUnknown/ActionParameterNotSupported)",
			"a 400 InsertMedia answer naming Inserted or WriteProtected", "InsertMedia is sent again with Image and TransferProtocolType only (media.go)"},
			func(f facts) bool {
				return f.status == 400 && slices.ContainsFunc(f.messages, func(m string) bool {
					return strings.Contains(m, "Inserted") || strings.Contains(m, "WriteProtected")
				})
			}},
		{QuirkInfo{QuirkAMIUpdateComponent, "AMI MegaRAC (GIGABYTE H262-Z63)",
			"SimpleUpdate chooses what it flashes by an OEM UpdateComponent parameter (BMC, BIOS, MB_CPLD ...) instead of Targets; without it the BMC flashes itself",
			"UpdateComponent in SimpleUpdate's ActionInfo", "StartUpdate names the component from the target's Id (update.go)"},
			func(f facts) bool { return strings.Contains(string(f.resource), `"UpdateComponent"`) }},
		{QuirkInfo{QuirkUpdateTargetsList, "HPE Cray EX",
			"lists the firmware SimpleUpdate may target in its ActionInfo (Targets AllowableValues); others are refused",
			"Targets AllowableValues in SimpleUpdate's ActionInfo", "a target outside the list is refused before anything is sent (update.go)"},
			func(f facts) bool { return strings.Contains(string(f.resource), `"Targets"`) }},
	}
}

var numericID = regexp.MustCompile(`"Id"\s*:\s*"[0-9]+"`)

// Quirks lists the known deviations, for documentation and `ingot bmc quirks`.
func Quirks() []QuirkInfo {
	var out []QuirkInfo
	for _, q := range quirkTable() {
		out = append(out, q.QuirkInfo)
	}
	return out
}

// quirkLog records the quirks a client has met (and logs each once).
type quirkLog struct {
	mu   sync.Mutex
	seen []Quirk
}

func (l *quirkLog) record(q Quirk) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.Contains(l.seen, q) {
		return false
	}
	l.seen = append(l.seen, q)
	return true
}

// quirk reports whether deviation q applies, from f (the client's
// identity is filled in); it records and logs the first time it does.
func (c *Client) quirk(ctx context.Context, q Quirk, f facts) bool {
	if f.id.vendor == "" {
		f.id = c.identity(ctx)
	}
	for _, s := range quirkTable() {
		if s.Name != q {
			continue
		}
		if !s.detect(f) {
			return false
		}
		if c.quirks.record(q) {
			c.log.Debug("bmc quirk", "bmc", c.cfg.Endpoint, "quirk", string(q), "vendor", s.Vendor)
		}
		return true
	}
	return false
}

// SeenQuirks lists the deviations this client has handled so far.
func (c *Client) SeenQuirks() []Quirk {
	c.quirks.mu.Lock()
	defer c.quirks.mu.Unlock()
	return slices.Clone(c.quirks.seen)
}

// identity is who the BMC says it is.
type identity struct {
	vendor   string // lowercased: the ServiceRoot's Vendor, else its Oem key, else the Manager's Manufacturer
	model    string // the Manager's Model ("iLO 5", "17G Monolithic")
	firmware string // the Manager's FirmwareVersion
}

// is reports a vendor by a lowercase name (hpe, dell, supermicro, ami).
func (id identity) is(vendor string) bool {
	aliases := map[string][]string{"hpe": {"hpe", "hp", "hewlett"}, "dell": {"dell"}, "supermicro": {"supermicro", "smc"},
		"ami": {"ami", "american megatrends"}}
	for _, a := range aliases[vendor] {
		if strings.HasPrefix(id.vendor, a) {
			return true
		}
	}
	return false
}

// identity reads (once) the ServiceRoot's Vendor and Oem and the first
// Manager's Model and FirmwareVersion.
func (c *Client) identity(ctx context.Context) identity {
	c.idOnce.Lock()
	defer c.idOnce.Unlock()
	if c.id != nil {
		return *c.id
	}
	api, err := c.gf(ctx)
	if err != nil {
		return identity{}
	}
	id := rootIdentity(api)
	if mgrs, err := api.Service.Managers(); err == nil && len(mgrs) > 0 {
		id.model, id.firmware = mgrs[0].Model, mgrs[0].FirmwareVersion
		if id.vendor == "" {
			id.vendor = strings.ToLower(mgrs[0].Manufacturer)
		}
	}
	c.id = &id
	return id
}

func rootIdentity(api *gofish.APIClient) identity {
	var id identity
	if api.Service == nil {
		return id
	}
	id.vendor = strings.ToLower(strings.TrimSpace(api.Service.Vendor))
	if id.vendor == "" {
		var oem map[string]json.RawMessage
		if json.Unmarshal(api.Service.OEM, &oem) == nil {
			keys := slices.Sorted(maps.Keys(oem))
			if len(keys) > 0 {
				id.vendor = strings.ToLower(keys[0])
			}
		}
	}
	return id
}

// hasSettings reports a resource with @Redfish.Settings.
func hasSettings(raw []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	_, ok := m["@Redfish.Settings"]
	return ok
}

// settingsObject is a resource's @Redfish.Settings.SettingsObject URI.
func settingsObject(raw []byte) string {
	var m struct {
		S struct {
			O struct {
				ID string `json:"@odata.id"`
			} `json:"SettingsObject"`
		} `json:"@Redfish.Settings"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	return m.S.O.ID
}
