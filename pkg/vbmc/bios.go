package vbmc

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
)

// patchBios stores pending BIOS attributes, applied at the next reset.
// Where the Bios resource names a settings object (DMTF: Bios/Settings), the
// PATCH goes there and the Bios resource itself is read-only (405). Where it
// names none (Gigabyte/AMI's @Redfish.Settings without SettingsObject, Cray
// with no @Redfish.Settings at all), PATCH Bios itself stores the pending
// attributes — that is what those BMCs accept and what gofish does.
func (b *BMC) patchBios(p string, body map[string]any) (int, *message) {
	doc, _ := b.peek(p)
	bios := p
	if parent := path.Dir(p); parent != p {
		if pd, ok := b.peek(parent); ok && typeIs(pd, "Bios") && settingsObject(pd) == p {
			bios = parent
		}
	}
	if bios == p {
		if so := settingsObject(doc); so != "" {
			m := msgNotAllowed(http.MethodPatch, p)
			m.Resolution = "PATCH the settings object " + so + "; pending settings apply at the next reset."
			return http.StatusMethodNotAllowed, &m
		}
	}
	for k := range body {
		if k != "Attributes" && !strings.HasPrefix(k, "@") {
			return http.StatusBadRequest, ptr(msgPropertyNotWritable(k))
		}
	}
	attrs, ok := body["Attributes"].(map[string]any)
	if !ok {
		return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(body["Attributes"]), "Attributes"))
	}
	cur, _ := b.peek(bios)
	known, _ := cur["Attributes"].(map[string]any)
	for k, v := range attrs {
		if m := checkAttribute(known, k, v); m != nil {
			return http.StatusBadRequest, m
		}
	}
	pend := b.pending[bios]
	if pend == nil {
		pend = map[string]any{}
		b.pending[bios] = pend
	}
	for k, v := range attrs {
		pend[k] = v
	}
	if so := settingsObject(cur); so != "" {
		if sd, ok := b.mutable(so); ok {
			sa, _ := sd["Attributes"].(map[string]any)
			if sa == nil {
				sa = map[string]any{}
				sd["Attributes"] = sa
			}
			for k, v := range attrs {
				sa[k] = v
			}
			b.touch(so)
		}
	}
	return 0, nil
}

// checkAttribute validates one BIOS attribute against the current ones:
// the name must exist where the mockup lists attributes, a plain value must
// keep its JSON type, and a Cray-style attribute object
// ({"current_value": ..., "AllowableValues": [...]}) must get an allowed value.
func checkAttribute(known map[string]any, name string, v any) *message {
	if len(known) == 0 {
		return nil
	}
	cur, ok := known[name]
	if !ok {
		return ptr(msgPropertyUnknown("Attributes/" + name))
	}
	if obj, ok := cur.(map[string]any); ok {
		if allowed := stringList(obj["AllowableValues"]); allowed != nil && !slices.Contains(allowed, fmt.Sprint(v)) {
			return ptr(msgValueNotInList(fmt.Sprint(v), name, allowed))
		}
		return nil
	}
	if cur != nil && v != nil && jsonKind(cur) != jsonKind(v) {
		return ptr(msgTypeError(fmt.Sprint(v), "Attributes/"+name))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	default:
		return "number"
	}
}

// applyBios makes pending attributes current, except the ones configured
// to refuse to stick (Config.StuckBIOS). b.mu held.
func (b *BMC) applyBios(bios string) {
	pend := b.pending[bios]
	if len(pend) == 0 {
		return
	}
	delete(b.pending, bios)
	doc, ok := b.mutable(bios)
	if !ok {
		return
	}
	attrs, _ := doc["Attributes"].(map[string]any)
	if attrs == nil {
		attrs = map[string]any{}
		doc["Attributes"] = attrs
	}
	for k, v := range pend {
		if b.stuck[k] {
			continue
		}
		// Cray: attributes are objects; the setting lands in current_value.
		if obj, ok := attrs[k].(map[string]any); ok {
			if _, has := obj["current_value"]; has {
				obj["current_value"] = v
				continue
			}
		}
		attrs[k] = v
	}
	b.touch(bios)
	if so := settingsObject(doc); so != "" {
		if sd, ok := b.mutable(so); ok {
			sd["Attributes"] = deepCopy(attrs)
			b.touch(so)
		}
	}
}

// PendingBIOS returns the pending attributes of the System at sys (for tests).
func (b *BMC) PendingBIOS(sys string) map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	doc, _ := b.peek(cleanPath(sys))
	out := map[string]any{}
	for k, v := range b.pending[linkOf(doc, "Bios")] {
		out[k] = v
	}
	return out
}
