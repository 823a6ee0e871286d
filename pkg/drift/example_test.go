package drift_test

import (
	"fmt"

	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

func ExampleCheck() {
	inv := machine.Inventory{GPUs: []machine.GPU{
		{Slot: "SXM1", Vendor: "NVIDIA", Model: "B200 180GB HBM3e", VRAMMiB: 183359,
			LinkCurrent: machine.PCIeLink{Gen: 5, Width: 8}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16}},
	}}
	r := &recipe.Recipe{Hardware: recipe.Hardware{GPUs: []recipe.GPUSpec{
		{Vendor: "nvidia", Model: "B200", Count: 2, PCIeWidth: 16},
	}}}
	fs := drift.Check(inv, r)
	for _, f := range fs {
		fmt.Println(f)
	}
	fmt.Println(drift.Summary(fs))
	// Output:
	// critical gpu: missing GPU: 1 of 2 B200 found (expected 2 x nvidia B200, found 1)
	// critical gpu SXM1: PCIe link trained at x8 instead of x16 (expected x16, found x8)
	// 2 critical, 0 warning, 0 info
}
