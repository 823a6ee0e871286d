package recipe_test

import (
	"fmt"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

func ExampleParse() {
	src := `name: gpu-small
version: 1.0.0
hardware:
  gpu:
    - {vendor: nvidia, model: L4, count: 2}
network:
  management_vlan: 5000
`
	_, diags := recipe.Parse("gpu-small.yaml", []byte(src))
	for _, d := range diags {
		fmt.Println(d)
	}
	// Output:
	// gpu-small.yaml:4:3: error: hardware.gpu: unknown field "gpu" in hardware; expected one of: gpus, cpu, memory, nics, psus, disks (did you mean "gpus"?)
	// gpu-small.yaml:7:20: error: network.management_vlan: expected 1 to 4094, found 5000
}

func ExampleDiff() {
	old := &recipe.Recipe{Name: "r", BIOS: recipe.BIOS{Attributes: map[string]recipe.Value{
		"SriovGlobalEnable": recipe.StringValue("Disabled")}},
		Hardware: recipe.Hardware{GPUs: []recipe.GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 8}}}}
	new := &recipe.Recipe{Name: "r", BIOS: recipe.BIOS{Attributes: map[string]recipe.Value{
		"SriovGlobalEnable": recipe.StringValue("Enabled"), "ProcC1E": recipe.StringValue("Disabled")}},
		Hardware: recipe.Hardware{GPUs: []recipe.GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 4}}}}
	for _, c := range recipe.Diff(old, new) {
		fmt.Println(c.Text)
	}
	// Output:
	// GPU count 8 -> 4
	// added BIOS attribute ProcC1E = Disabled
	// BIOS SriovGlobalEnable: Disabled -> Enabled
}
