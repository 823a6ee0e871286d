package bmc

import (
	"encoding/json"
	"testing"

	"github.com/stmcginnis/gofish/schemas"
)

// FuzzNormalize feeds BMC bytes through gofish's decoding and ingot's
// normalization and raw-link readers: whatever a BMC sends must not panic.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"Id":"GPU0","ProcessorType":"GPU","Links":{"Memory":[{"@odata.id":"/m"}],"PCIeDevice":{"@odata.id":"/p"}},` +
		`"SystemInterface":{"InterfaceType":"PCIe","PCIe":{"LanesInUse":8,"PCIeType":"Gen4"}},"ProcessorMemory":[{"CapacityMiB":80}]}`))
	f.Add([]byte(`{"Boot":{"BootSourceOverrideTarget":"Pxe"},"Bios":{"@odata.id":"/b"},"Links":{"Memory":{"@odata.id":"/x"}}}`))
	f.Add([]byte(`{"Attributes":{"A":{"current_value":1}},"@Redfish.Settings":{"SettingsObject":{"@odata.id":"/s"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = link(b, "Bios")
		_ = processorLinks(b, "Memory")
		_ = hasBootProperty(b, "BootSourceOverrideTarget")
		var p schemas.Processor
		if json.Unmarshal(b, &p) == nil {
			_ = normGPU(&p)
			_ = normCPU(&p)
		}
		var m schemas.Memory
		if json.Unmarshal(b, &m) == nil {
			_, _ = normDIMM(&m)
		}
		var d schemas.Drive
		if json.Unmarshal(b, &d) == nil {
			_ = normDrive(&d)
		}
		var doc biosDoc
		if json.Unmarshal(b, &doc) == nil {
			_ = compareAttributes(doc.Attributes, map[string]any{"A": int64(1), "B": "x"})
		}
		var ps powerSubsystemDoc
		if json.Unmarshal(b, &ps) == nil {
			_ = ps.redundancy()
		}
	})
}
