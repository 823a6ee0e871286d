package recipe

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file holds the words of diagnostics: what a type expects, what a
// node holds, field paths, and did-you-mean suggestions.

// expected names what a Go type accepts, for messages.
func expected(t reflect.Type) string {
	switch t {
	case typeSize:
		return "a size with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 80GiB"
	case typeSpeed:
		return "a speed with a unit (Mbps, Gbps, Tbps), e.g. 400Gbps"
	case typeDuration:
		return "a duration such as 90s, 15m or 2h"
	case typeValue:
		return "a string, an integer or a boolean"
	case typeQuantity:
		return "a number, or a number with a unit such as 400Gbps, 2TiB, 350GB/s or 600Tflop/s"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a mapping of names to " + strings.TrimPrefix(strings.TrimPrefix(expected(t.Elem()), "a "), "an ") + "s"
	case reflect.Pointer:
		return expected(t.Elem())
	case reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// describe names what a YAML node holds, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
	default:
		return "an unsupported YAML node"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("string %q", v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return fmt.Sprintf("number %s (quote it if it is a version: %q)", v, v)
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "an empty value"
	}
	return fmt.Sprintf("%s %q", n.ShortTag(), v)
}

// join appends a key to a field path.
func join(path, key string) string {
	if !plainKey(key) {
		key = strconv.Quote(key)
		if path == "" {
			return "[" + key + "]"
		}
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// where names the mapping a path points at, for messages.
func where(path string) string {
	if path == "" {
		return "the recipe"
	}
	return path
}

// suggest returns the candidate closest to s, if it is close enough to be
// a likely typo.
func suggest(s string, candidates []string) string {
	if s == "" {
		return ""
	}
	best, bestDist := "", 3
	for _, c := range candidates {
		d := levenshtein(strings.ToLower(s), strings.ToLower(c))
		if strings.HasPrefix(c, s) || strings.HasPrefix(s, c) {
			d = min(d, 1)
		}
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
