package recipe

import (
	"strings"
)

// This file adds to the generated schema what lint checks beyond the
// struct tags: each check's unit, bounds and args (from the registry), the
// driver keys, the firmware policy components, and no all-zero sha256
// outside a template. Cross-file rules (extends) stay lint's alone.

// quantitySchema is the schema of a threshold in unit u.
func quantitySchema(u Unit) map[string]any {
	switch u {
	case UnitBitsPerSecond:
		return map[string]any{"type": "string", "pattern": bitsPattern, "examples": []string{"25Gbps", "400Gbps"}}
	case UnitBytes:
		return map[string]any{"type": "string", "pattern": sizePattern, "examples": []string{"512GiB", "2TiB"}}
	case UnitBytesPerSecond:
		return map[string]any{"type": "string", "pattern": bytesPSPattern, "examples": []string{"350GB/s", "20GiB/s"}}
	case UnitFlops:
		return map[string]any{"type": "string", "pattern": flopsPattern, "examples": []string{"50000Gflop/s", "600Tflop/s"}}
	case UnitCount:
		return map[string]any{"type": "integer", "minimum": 0}
	case UnitGeneration:
		return map[string]any{"type": "integer", "minimum": 1, "maximum": 6}
	}
	return map[string]any{"type": "number", "minimum": 0}
}

func addRules(root map[string]any, defs map[string]any) {
	props := root["properties"].(map[string]any)
	props["drivers"].(map[string]any)["propertyNames"] = map[string]any{"enum": strs(DriverKeys())}
	fw := defs["Firmware"].(map[string]any)["properties"].(map[string]any)
	fw["policy"].(map[string]any)["propertyNames"] = map[string]any{"pattern": `^(bios|bmc|gpu|nic|other\..+)$`}
	checkRules(defs["Check"].(map[string]any))
	zeros := map[string]any{"not": map[string]any{"const": strings.Repeat("0", 64)}}
	pinned := map[string]any{"properties": map[string]any{"sha256": zeros}}
	root["if"] = map[string]any{"properties": map[string]any{"template": map[string]any{"const": true}}, "required": []string{"template"}}
	root["else"] = map[string]any{"properties": map[string]any{"os": map[string]any{"properties": map[string]any{
		"image": pinned,
		"agent": map[string]any{"properties": map[string]any{"kernel": pinned, "initrd": pinned}},
	}}}}
}

// checkRules gives a check's name its enum and, per registered check, the
// schema its min, max and args must meet.
func checkRules(check map[string]any) {
	props := check["properties"].(map[string]any)
	var names []string
	var rules []any
	for _, d := range checkDefs() {
		names = append(names, d.spec.Name)
		then := map[string]any{
			"min":  bound(d, d.min),
			"max":  bound(d, d.max),
			"args": argsSchema(d),
		}
		if !d.count {
			then["count"] = false
		}
		rule := map[string]any{"properties": then}
		if d.minNeeds != "" {
			rule["if"] = map[string]any{"required": []string{"min"}}
			rule["then"] = map[string]any{"required": []string{"args"},
				"properties": map[string]any{"args": map[string]any{"required": []string{d.minNeeds}}}}
		}
		rules = append(rules, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"name": map[string]any{"const": d.spec.Name}}, "required": []string{"name"}},
			"then": rule,
		})
	}
	props["name"].(map[string]any)["enum"] = strs(names)
	check["allOf"] = rules
}

func bound(d checkDef, reads bool) any {
	if !reads {
		return false
	}
	return quantitySchema(d.spec.Unit)
}

func argsSchema(d checkDef) any {
	if len(d.args) == 0 {
		return false
	}
	props := map[string]any{}
	for _, a := range d.args {
		s := map[string]any{"type": "string", "description": a.expect}
		switch {
		case a.enum != nil:
			s["enum"] = strs(a.enum)
		case a.pattern != "":
			s["pattern"] = a.pattern
		default:
			s["minLength"] = 1
		}
		props[a.name] = s
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

func strs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
