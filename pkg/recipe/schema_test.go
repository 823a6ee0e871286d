package recipe

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := SchemaJSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "schema.json"), b)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("recipe.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("recipe.json")
	if err != nil {
		t.Fatalf("compiling the generated schema: %v", err)
	}
	return s
}

// yamlAsJSON converts a recipe file to the JSON value an editor validates.
func yamlAsJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	j, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestSchemaValidatesShippedRecipes: the schema generated from the Go types
// accepts every recipe in recipes/ and matches its golden file.
func TestSchemaValidatesShippedRecipes(t *testing.T) {
	s := compileSchema(t)
	files, _ := ReadPaths(filepath.Join(repoRoot(t), "recipes"))
	if len(files) < 4 {
		t.Fatalf("only %d shipped recipes", len(files))
	}
	for _, f := range files {
		if err := s.Validate(yamlAsJSON(t, f.Data)); err != nil {
			t.Errorf("%s does not validate against the schema: %v", f.Name, err)
		}
	}
}

// TestSchemaRejects: the schema is strict too (so the test above can fail).
func TestSchemaRejects(t *testing.T) {
	s := compileSchema(t)
	for name, src := range map[string]string{
		"unknown field":   "name: x\nversion: '1'\nhardware:\n  gpu: []\n",
		"missing version": "name: x\n",
		"size unit":       "name: x\nversion: '1'\nhardware:\n  memory:\n    total: 2048\n",
		"value type":      "name: x\nversion: '1'\nbios:\n  attributes:\n    A: [1]\n",
		"speed":           "name: x\nversion: '1'\nhardware:\n  nics:\n    - role: workload\n      speed: 400G\n",
		"duration":        "name: x\nversion: '1'\ntimeouts:\n  post: 15 minutes\n",
		"enum":            "name: x\nversion: '1'\nos:\n  handoff: pxe\n",
		"int enum":        "name: x\nversion: '1'\nhardware:\n  gpus:\n    - {vendor: nvidia, model: H100, count: 8, pcie_width: 12}\n",
		"range":           "name: x\nversion: '1'\nnetwork:\n  management_vlan: 5000\n",
		"sha256":          "name: x\nversion: '1'\nos:\n  image: {name: lab, sha256: ABC}\n",
	} {
		if err := s.Validate(yamlAsJSON(t, []byte(src))); err == nil {
			t.Errorf("%s: schema accepted %q", name, src)
		}
	}
	if err := s.Validate(yamlAsJSON(t, []byte("name: x\nversion: '1'\nbios:\n  attributes: {A: 1, B: x, C: true}\n"))); err != nil {
		t.Errorf("typed attributes rejected: %v", err)
	}
	b, _ := SchemaJSON()
	if !strings.Contains(string(b), `"description": "unique class name, e.g. gpu-train-h100x8"`) {
		t.Error("doc tags are not descriptions")
	}
}
