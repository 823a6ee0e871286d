package vbmc

import (
	"strconv"
	"strings"
)

// maxExpandLevels bounds $levels, as services advertise a MaxLevels.
const maxExpandLevels = 6

// expandQuery is a parsed $expand value (DSP0266 7.3 "Query parameters").
type expandQuery struct {
	links       bool // expand hyperlinks inside Links ("~" or "*")
	subordinate bool // expand the other hyperlinks ("." or "*")
	levels      int
}

// parseExpand reads "." "~" "*", optionally followed by "($levels=N)". An
// empty or unknown value reads as "." (what gofish's AutoExpand sends is
// "." alone); levels default to 1 and are capped at maxExpandLevels.
func parseExpand(v string) expandQuery {
	q := expandQuery{subordinate: true, levels: 1}
	v = strings.TrimSpace(v)
	switch {
	case strings.HasPrefix(v, "*"):
		q.links = true
	case strings.HasPrefix(v, "~"):
		q.links, q.subordinate = true, false
	}
	if i := strings.Index(v, "$levels="); i >= 0 {
		n := strings.TrimRight(v[i+len("$levels="):], ")")
		if l, err := strconv.Atoi(strings.TrimSpace(n)); err == nil && l > 0 {
			q.levels = min(l, maxExpandLevels)
		}
	}
	return q
}

// expand answers $expand: every hyperlink the query covers ({"@odata.id":
// ...} alone, not a fragment of a resource) is replaced by the resource it
// names, to $levels levels. A collection's Members are subordinate
// hyperlinks, so "." on a collection inlines its members (what gofish's
// AutoExpand relies on) and ".($levels=2)" on the Chassis collection also
// inlines each chassis' Power, Thermal, Sensors ... Annotations (@...) and
// Actions are never expanded; a link to a missing resource stays a link.
// b.mu held.
func (b *BMC) expand(body []byte, value string) []byte {
	doc, err := decodeDoc(body)
	if err != nil {
		return body
	}
	q := parseExpand(value)
	b.expandIn(doc, q, q.levels, false)
	if out, err := encodeDoc(doc); err == nil {
		return out
	}
	return body
}

// expandIn expands the hyperlinks in v, levels deep; inLinks says whether v
// sits inside a Links object.
func (b *BMC) expandIn(v any, q expandQuery, levels int, inLinks bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.Contains(k, "@") || k == "Actions" {
				continue
			}
			links := inLinks || k == "Links"
			if r, ok := b.expandLink(e, q, levels, links); ok {
				x[k] = r
				continue
			}
			b.expandIn(e, q, levels, links)
		}
	case []any:
		for i, e := range x {
			if r, ok := b.expandLink(e, q, levels, inLinks); ok {
				x[i] = r
				continue
			}
			b.expandIn(e, q, levels, inLinks)
		}
	}
}

// expandLink returns the resource a covered hyperlink names, itself
// expanded one level less.
func (b *BMC) expandLink(v any, q expandQuery, levels int, inLinks bool) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 || levels < 1 || (inLinks && !q.links) || (!inLinks && !q.subordinate) {
		return nil, false
	}
	id, ok := m["@odata.id"].(string)
	if !ok || strings.Contains(id, "#") {
		return nil, false
	}
	body, _, found := b.render(cleanPath(id))
	if !found {
		return nil, false
	}
	doc, err := decodeDoc(body)
	if err != nil {
		return nil, false
	}
	b.expandIn(doc, q, levels-1, false)
	return doc, true
}
