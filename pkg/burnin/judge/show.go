package judge

import (
	"strconv"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Show prints a measured value for people, in the largest unit it
// reaches, to 4 significant digits: 45.68Tflop/s, 372.1GB/s, 392.5Gbps.
func Show(v float64, u recipe.Unit) string {
	units := map[recipe.Unit][]string{
		recipe.UnitFlops:          {"flop/s", "Kflop/s", "Mflop/s", "Gflop/s", "Tflop/s", "Pflop/s"},
		recipe.UnitBytesPerSecond: {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"},
		recipe.UnitBitsPerSecond:  {"bps", "Kbps", "Mbps", "Gbps", "Tbps"},
	}[u]
	if len(units) == 0 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	i := 0
	for i < len(units)-1 && v >= 1000 {
		v /= 1000
		i++
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + units[i]
}
