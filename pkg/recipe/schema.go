package recipe

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// Patterns the schema gives for the unit types. They accept a subset of
// what ParseSize, ParseSpeed and ParseDuration read (plain decimals only).
const (
	sizePattern     = `^\s*[0-9]*\.?[0-9]+\s*(B|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB)\s*$`
	speedPattern    = `^\s*[0-9]*\.?[0-9]+\s*(Mbps|Gbps|Tbps)\s*$`
	durationPattern = `^\s*(0|([0-9]*\.?[0-9]+(ns|us|µs|ms|s|m|h))+)\s*$`
	bitsPattern     = `^\s*[0-9]*\.?[0-9]+\s*(bps|Kbps|Mbps|Gbps|Tbps)\s*$`
	bytesPSPattern  = `^\s*[0-9]*\.?[0-9]+\s*(B|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB)/s\s*$`
	flopsPattern    = `^\s*[0-9]*\.?[0-9]+\s*(flop|Mflop|Gflop|Tflop|Pflop)/s\s*$`
)

// Schema returns a JSON Schema (draft 2020-12) of a recipe file, generated
// from the Go types: YAML keys are the json tags, fields without omitempty
// are required, doc tags become descriptions, unknown keys are refused.
// Editors use it through yaml-language-server; the strict parser and lint
// remain the authority (extends, cross-field and set checks).
func Schema() map[string]any {
	g := &schemaGen{defs: map[string]any{}}
	root := g.object(reflect.TypeFor[Recipe]())
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["title"] = "ingot recipe"
	root["description"] = "One server class: the hardware, firmware, BIOS, OS image, drivers, network and acceptance every server of the class must have."
	root["$defs"] = g.defs
	addRules(root, g.defs)
	return root
}

// SchemaJSON is Schema as indented JSON with a final newline.
func SchemaJSON() ([]byte, error) {
	b, err := json.MarshalIndent(Schema(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

type schemaGen struct {
	defs map[string]any
}

func (g *schemaGen) of(t reflect.Type) map[string]any {
	switch t {
	case typeSize:
		return map[string]any{"type": "string", "pattern": sizePattern, "examples": []string{"80GiB", "2TiB", "1.92TB"}}
	case typeSpeed:
		return map[string]any{"type": "string", "pattern": speedPattern, "examples": []string{"25Gbps", "400Gbps"}}
	case typeDuration:
		return map[string]any{"type": "string", "pattern": durationPattern, "examples": []string{"90s", "15m", "2h"}}
	case typeValue:
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "string"}, map[string]any{"type": "integer"}, map[string]any{"type": "boolean"}}}
	case typeQuantity:
		var units []any
		for _, u := range physicalUnits {
			units = append(units, quantitySchema(u))
		}
		return map[string]any{"anyOf": append([]any{map[string]any{"type": "number", "minimum": 0}}, units...)}
	case typeFirmwareAction:
		return map[string]any{"type": "string", "enum": []any{string(FirmwareUpdate), string(FirmwareBlock), string(FirmwareWarn)}}
	case typePin:
		if _, ok := g.defs["Pin"]; !ok {
			o := g.object(t)
			// Lint's rule: a pin a campaign updates names its package.
			o["if"] = map[string]any{"properties": map[string]any{"policy": map[string]any{"const": string(FirmwareUpdate)}}, "required": []string{"policy"}}
			o["then"] = map[string]any{"required": []string{"package"}}
			g.defs["Pin"] = o
		}
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "string", "minLength": 1, "description": "the version alone: policy block (or firmware.policy's)"},
			map[string]any{"$ref": "#/$defs/Pin"}}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.of(t.Elem())
	case reflect.Struct:
		if _, ok := g.defs[t.Name()]; !ok {
			g.defs[t.Name()] = true // placeholder against recursion
			g.defs[t.Name()] = g.object(t)
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.of(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{}
}

// object is the schema of a struct: its fields, required ones listed.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range fieldsOf(t) {
		sf := t.Field(f.index)
		s := g.of(sf.Type)
		if f.doc != "" {
			s["description"] = f.doc
		}
		constrain(s, sf)
		props[f.key] = s
		if f.required {
			required = append(required, f.key)
		}
	}
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// constrain copies a field's enum, min, max and pattern tags (the ones lint
// checks) into its schema.
func constrain(s map[string]any, f reflect.StructField) {
	if enum := f.Tag.Get("enum"); enum != "" {
		var vals []any
		for _, e := range strings.Split(enum, ",") {
			if i, err := strconv.Atoi(e); err == nil && f.Type.Kind() != reflect.String {
				vals = append(vals, i)
			} else {
				vals = append(vals, e)
			}
		}
		s["enum"] = vals
	}
	if v, ok := tagFloat(f.Tag, "min"); ok {
		s["minimum"] = v
	}
	if v, ok := tagFloat(f.Tag, "max"); ok {
		s["maximum"] = v
	}
	if p := f.Tag.Get("pattern"); p != "" {
		s["pattern"] = p
	}
}
