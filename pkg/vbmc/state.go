package vbmc

import (
	"fmt"
	"net/http"
	"strings"
)

// A BMC's state is its mockup tree plus an overlay of the resources it has
// changed. Unchanged resources are served straight from the shared tree's
// bytes; a resource is decoded into the overlay the first time it changes.
// All methods here expect b.mu held.

// peek returns the current document at p for reading only (a fresh decode
// for tree resources, the live map for overlay ones). Do not modify it.
func (b *BMC) peek(p string) (map[string]any, bool) {
	if doc, ok := b.overlay[p]; ok {
		return doc, doc != nil
	}
	res, ok := b.tree.docs[p]
	if !ok {
		return nil, false
	}
	doc, err := decodeDoc(res.body)
	if err != nil {
		return nil, false
	}
	return doc, true
}

// mutable returns the document at p in the overlay, copying it there first.
// Call touch after changing it.
func (b *BMC) mutable(p string) (map[string]any, bool) {
	if doc, ok := b.overlay[p]; ok {
		return doc, doc != nil
	}
	doc, ok := b.peek(p)
	if !ok {
		return nil, false
	}
	b.overlay[p] = doc
	b.etags[p] = b.tree.docs[p].etag
	return doc, true
}

// put stores a new document at p (nil removes it).
func (b *BMC) put(p string, doc map[string]any) {
	b.overlay[p] = doc
	if doc != nil {
		b.touch(p)
	}
}

// touch gives a changed resource a new entity tag, in the header and in
// @odata.etag, so If-Match sees the change.
func (b *BMC) touch(p string) {
	b.gen++
	tag := fmt.Sprintf(`W/"ingot-%d"`, b.gen)
	b.etags[p] = tag
	if doc := b.overlay[p]; doc != nil {
		if _, ok := doc["@odata.etag"]; ok {
			doc["@odata.etag"] = tag
		}
	}
}

// etag returns the current entity tag of p.
func (b *BMC) etag(p string) string {
	if _, ok := b.overlay[p]; ok {
		return b.etags[p]
	}
	return b.tree.docs[p].etag
}

// render returns the body and entity tag to serve for p: a log service
// resource (logs.go), else the stored resource with the scripted readings
// in force (see Scenario).
func (b *BMC) render(p string) ([]byte, string, bool) {
	if doc, found, _ := b.logDoc(p, nil); found {
		body, err := encodeDoc(doc)
		return body, "", err == nil
	}
	body, etag, ok := b.stored(p)
	if !ok || b.script == nil {
		return body, etag, ok
	}
	body, etag = b.scripted(p, body, etag)
	return body, etag, true
}

// stored returns the body and entity tag of p as the BMC keeps it. The
// System the Backend drives reports the backend's power state.
func (b *BMC) stored(p string) ([]byte, string, bool) {
	if p == b.powered && b.powered != "" {
		doc, ok := b.peek(p)
		if !ok {
			return nil, "", false
		}
		if b.overlay[p] == nil {
			doc = deepCopy(doc).(map[string]any)
		}
		doc["PowerState"] = b.cfg.Backend.State()
		body, err := encodeDoc(doc)
		return body, b.etag(p), err == nil
	}
	if doc, ok := b.overlay[p]; ok {
		if doc == nil {
			return nil, "", false
		}
		body, err := encodeDoc(doc)
		return body, b.etags[p], err == nil
	}
	res, ok := b.tree.docs[p]
	return res.body, res.etag, ok
}

// checkIfMatch returns a PreconditionFailed message when the request's
// If-Match names no current entity tag of p ("*" matches anything). Weak
// and strong forms compare equal, as gofish and sushy send either.
func (b *BMC) checkIfMatch(r *http.Request, p string) *message {
	im := r.Header.Get("If-Match")
	if im == "" {
		return nil
	}
	cur := strings.TrimPrefix(b.etag(p), "W/")
	for _, t := range strings.Split(im, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == cur {
			return nil
		}
	}
	return ptr(msgPrecondition(p, im, b.etag(p)))
}

// systems lists the System resources in Systems collection order.
func (b *BMC) systems() []string { return b.tree.systems }

// powerState returns the PowerState of the System at p.
func (b *BMC) powerState(p string) string {
	if p == b.powered && p != "" {
		return b.cfg.Backend.State()
	}
	doc, ok := b.peek(p)
	if !ok {
		return ""
	}
	s, _ := doc["PowerState"].(string)
	return s
}
