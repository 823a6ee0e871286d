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
		"zero sha256":     "name: x\nversion: '1'\nos:\n  image: {name: lab, sha256: '" + strings.Repeat("0", 64) + "'}\n",
		"zero agent pin":  "name: x\nversion: '1'\nos:\n  agent:\n    kernel: {sha256: '" + strings.Repeat("0", 64) + "'}\n",
		"bare number":     "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: nic-link, min: 400}\n",
		"wrong unit":      "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: nic-link, min: 400GB/s}\n",
		"unit on a count": "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: gpu-count, min: 8Gbps}\n",
		"unknown check":   "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: gpu-burnin}\n",
		"unknown arg":     "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: pcie-link, args: {lanes: '16'}}\n",
		"arg value":       "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: dcgm-diag, args: {level: '5'}}\n",
		"unread max":      "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: nic-link, max: 400Gbps}\n",
		"unknown driver":  "name: x\nversion: '1'\ndrivers: {cuda: '12.2'}\n",
		"policy action":   "name: x\nversion: '1'\nfirmware: {bios: '1', policy: {bios: ignore}}\n",
		"policy key":      "name: x\nversion: '1'\nfirmware: {bios: '1', policy: {psu: warn}}\n",
		"min_tflops":      "name: x\nversion: '1'\nacceptance:\n  burn_in: {duration: 2h, min_tflops: 600}\n",
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

// TestSchemaAgreesWithLint: on single files (no extends), the schema
// rejects exactly what lint reports errors for, so an editor and
// `ingot recipe lint` tell an author the same thing.
func TestSchemaAgreesWithLint(t *testing.T) {
	s := compileSchema(t)
	zero := strings.Repeat("0", 64)
	for name, src := range map[string]string{
		"template placeholder":  "name: x\nversion: '1'\ntemplate: true\nos:\n  image: {name: lab, sha256: '" + zero + "'}\n",
		"placeholder":           "name: x\nversion: '1'\nos:\n  image: {name: lab, sha256: '" + zero + "'}\n",
		"units":                 "name: x\nversion: '1'\nacceptance:\n  burn_in: {duration: 1h}\n  checks:\n    - {name: nic-link, min: 400Gbps}\n    - {name: gpu-burn, min: 600Tflop/s, optional: true}\n    - {name: memory-size, min: 512GiB, max: 2TiB}\n",
		"bare physical":         "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: memory-size, min: 2048}\n",
		"plain count":           "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: disk-present, min: 2, max: 4}\n",
		"generation":            "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: pcie-link, min: 7}\n",
		"flops as bytes":        "name: x\nversion: '1'\nacceptance:\n  burn_in: {duration: 1h}\n  checks:\n    - {name: gpu-burn, min: 600TB/s}\n",
		"args":                  "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: memory-size, args: {tolerance: '2'}}\n    - {name: pcie-link, args: {width: '16'}}\n",
		"bad tolerance":         "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: memory-size, args: {tolerance: '101'}}\n",
		"no-arg check":          "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: disk-health, args: {smart: pass}}\n",
		"gpu-model min":         "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: gpu-model, min: 2}\n",
		"gpu-model min+model":   "name: x\nversion: '1'\nacceptance:\n  checks:\n    - {name: gpu-model, min: 2, args: {model: L4}}\n",
		"drivers":               "name: x\nversion: '1'\ndrivers: {nvidia: 535.309.01, cuda-driver: '12.2', cuda-toolkit: 12.2.140, nvidia-fabricmanager: 535.309.01, ofed: 23.10-2.1.3.1, amdgpu: 6.7.0}\n",
		"old cuda key":          "name: x\nversion: '1'\ndrivers: {cuda: '12.2'}\n",
		"policy":                "name: x\nversion: '1'\nfirmware: {gpu: '1', other: {cpld: '2'}, policy: {gpu: warn, other.cpld: block}}\n",
		"policy bad action":     "name: x\nversion: '1'\nfirmware: {gpu: '1', policy: {gpu: maybe}}\n",
		"burn-in timeout":       "name: x\nversion: '1'\nacceptance:\n  burn_in: {duration: 2h, timeout: 3h}\n",
		"pin update":            "name: x\nversion: '1'\nfirmware: {bmc: {version: '1', package: " + pkgSHA + ", policy: update, apply_time: immediate}}\n",
		"pin update no package": "name: x\nversion: '1'\nfirmware: {bmc: {version: '1', policy: update}}\n",
		"pin numeric component": "name: x\nversion: '1'\nfirmware: {other: {a40: {version: '1', component: '5'}}}\n",
		"pin named component":   "name: x\nversion: '1'\nfirmware: {other: {a40: {version: '1', component: NVIDIA A40}}}\n",
		"pin bad apply time":    "name: x\nversion: '1'\nfirmware: {gpu: {version: '1', apply_time: now}}\n",
		"pin bad package":       "name: x\nversion: '1'\nfirmware: {gpu: {version: '1', package: abc}}\n",
		"pin no version":        "name: x\nversion: '1'\nfirmware: {gpu: {policy: warn}}\n",
	} {
		_, diags := Parse("x.yaml", []byte(src))
		lintErr := HasErrors(diags)
		schemaErr := s.Validate(yamlAsJSON(t, []byte(src))) != nil
		if lintErr != schemaErr {
			t.Errorf("%s: lint errors %v, schema rejects %v\nlint:\n%s", name, lintErr, schemaErr, diagText(diags))
		}
	}
}
