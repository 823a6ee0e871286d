package vbmc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// tree is a mockup loaded from disk: the JSON body of every resource, keyed
// by its URI without a trailing slash ("/redfish/v1/Systems/1"). It is shared,
// read-only, by every BMC made from the same mockup; each BMC keeps its
// changes in its own overlay (see state.go), so 500 BMCs cost one tree.
type tree struct {
	root     string
	docs     map[string]resource
	systems  []string // ComputerSystem resources, in Systems collection order
	accounts []string // ManagerAccount resources, sorted by path
}

// resource is one stored JSON body and its entity tag.
type resource struct {
	body []byte
	etag string
}

const (
	serviceRoot     = "/redfish/v1"
	sessionsPath    = "/redfish/v1/SessionService/Sessions"
	sessionSvcPath  = "/redfish/v1/SessionService"
	settingsKey     = "@Redfish.Settings"
	resetAction     = "#ComputerSystem.Reset"
	insertMediaName = "#VirtualMedia.InsertMedia"
	ejectMediaName  = "#VirtualMedia.EjectMedia"
)

// loadTree reads every index.json under root/redfish and normalizes the
// mockup into a service that starts clean (see normalize).
func loadTree(root string) (*tree, error) {
	base := filepath.Join(root, "redfish")
	if _, err := os.Stat(filepath.Join(base, "v1", "index.json")); err != nil {
		return nil, fmt.Errorf("loading mockup %s: expected the DMTF layout with redfish/v1/index.json: %w", root, err)
	}
	docs := map[string]map[string]any{}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "index.json" {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := decodeDoc(b)
		if err != nil {
			return fmt.Errorf("parsing mockup file %s: %w", p, err)
		}
		docs["/"+filepath.ToSlash(rel)] = doc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading mockup %s: %w", root, err)
	}
	normalize(docs)
	t := &tree{root: root, docs: make(map[string]resource, len(docs))}
	if coll, ok := docs[serviceRoot+"/Systems"]; ok {
		for _, m := range members(coll) {
			if typeIs(docs[m], "ComputerSystem") {
				t.systems = append(t.systems, m)
			}
		}
	}
	for p, doc := range docs {
		if typeIs(doc, "ManagerAccount") {
			t.accounts = append(t.accounts, p)
		}
		b, err := encodeDoc(doc)
		if err != nil {
			return nil, fmt.Errorf("loading mockup %s: encoding %s: %w", root, p, err)
		}
		t.docs[p] = resource{body: b, etag: docETag(doc, b)}
	}
	sort.Strings(t.accounts)
	return t, nil
}

// decodeDoc parses one resource, keeping numbers exact.
func decodeDoc(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("expected a JSON object: %w", err)
	}
	return doc, nil
}

func encodeDoc(doc map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// docETag is the resource's own @odata.etag when the mockup has one (so the
// header and the body agree), else a hash of the body.
func docETag(doc map[string]any, body []byte) string {
	if s, ok := doc["@odata.etag"].(string); ok && s != "" {
		return s
	}
	h := fnv.New64a()
	h.Write(body)
	return fmt.Sprintf(`W/"%x"`, h.Sum64())
}

// normalize turns a captured mockup into a service that starts clean:
//   - captured sessions are dropped, so the open-session count starts at 0;
//     a SessionService and its Sessions collection are made where the
//     capture lacks them (the partial Supermicro tree), because login is
//     BMC behaviour, not data;
//   - a BIOS settings object starts equal to the current attributes (no
//     pending changes), so the first reset changes nothing by itself;
//   - account passwords read as null, as real BMCs do.
func normalize(docs map[string]map[string]any) {
	for p := range docs {
		if strings.HasPrefix(p, sessionsPath+"/") {
			delete(docs, p)
		}
	}
	if _, ok := docs[sessionSvcPath]; !ok {
		docs[sessionSvcPath] = map[string]any{
			"@odata.id":      sessionSvcPath,
			"@odata.type":    "#SessionService.v1_1_8.SessionService",
			"Id":             "SessionService",
			"Name":           "Session Service",
			"ServiceEnabled": true,
			"SessionTimeout": json.Number("1800"),
			"Sessions":       map[string]any{"@odata.id": sessionsPath},
		}
	}
	sess, ok := docs[sessionsPath]
	if !ok {
		sess = map[string]any{
			"@odata.id":   sessionsPath,
			"@odata.type": "#SessionCollection.SessionCollection",
			"Name":        "Session Collection",
		}
		docs[sessionsPath] = sess
	}
	sess["Members"] = []any{}
	sess["Members@odata.count"] = json.Number("0")
	for _, doc := range docs {
		if typeIs(doc, "ManagerAccount") {
			if _, ok := doc["Password"]; ok {
				doc["Password"] = nil
			}
		}
		if !typeIs(doc, "Bios") {
			continue
		}
		if so := settingsObject(doc); so != "" {
			if sd, ok := docs[so]; ok {
				sd["Attributes"] = deepCopy(doc["Attributes"])
			}
		}
	}
}

// typeIs reports whether doc's @odata.type names the schema ("#Bios.v1_2_3.Bios").
func typeIs(doc map[string]any, schema string) bool {
	t, _ := doc["@odata.type"].(string)
	return strings.HasPrefix(t, "#"+schema+".")
}

// settingsObject returns the URI of a resource's settings object, or "".
func settingsObject(doc map[string]any) string {
	s, _ := doc[settingsKey].(map[string]any)
	so, _ := s["SettingsObject"].(map[string]any)
	id, _ := so["@odata.id"].(string)
	return cleanPath(id)
}

// cleanPath maps a request or link path to a tree key.
func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	p = path.Clean("/" + p)
	return strings.TrimSuffix(p, "/")
}

// members returns the @odata.id links of a collection, in order.
func members(doc map[string]any) []string {
	ms, _ := doc["Members"].([]any)
	var out []string
	for _, m := range ms {
		mm, _ := m.(map[string]any)
		if id, ok := mm["@odata.id"].(string); ok {
			out = append(out, cleanPath(id))
		}
	}
	return out
}

// deepCopy copies decoded JSON so an overlay never aliases another's values.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	default:
		return v
	}
}
