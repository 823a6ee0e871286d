package lab

import (
	"fmt"
	"path/filepath"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// hardware is what the lab builds for its recipe: the golden image the
// recipe installs (a folder of images/) and the data disks its VMs get.
type hardware struct {
	Image     string
	DataDisks []int64 // bytes, one entry a disk
}

// maxDataDisk bounds a lab data disk: the lab makes what a recipe asks
// for, but sparse files on the host, not real capacity.
const maxDataDisk = 4 << 30

// recipeHardware reads the lab's recipe (extends resolved) from the
// repository: os.image.name picks the image to build, and every
// hardware.disks rule other than the boot disk's becomes a data disk of
// its min_size on each VM (count times), so a recipe that burns disks in
// with fio gets disks to read.
func recipeHardware(repoRoot, name string) (hardware, error) {
	dir := filepath.Join(repoRoot, "recipes")
	set, diags := recipe.LoadDir(dir)
	for _, d := range diags {
		if d.Severity == recipe.SeverityError {
			return hardware{}, fmt.Errorf("lab recipes in %s: %s", dir, d)
		}
	}
	r, ok := set.Get(name)
	if !ok {
		return hardware{}, fmt.Errorf("lab recipe %s: not in %s (have %v)", name, dir, set.Names())
	}
	hw := hardware{Image: r.OS.Image.Name}
	if hw.Image == "" {
		return hardware{}, fmt.Errorf("lab recipe %s: os.image.name is empty: expected a folder of images/", name)
	}
	for i, d := range r.Hardware.Disks {
		if d.Boot {
			continue
		}
		size := d.MinSize.Bytes()
		if size <= 0 || size > maxDataDisk {
			return hardware{}, fmt.Errorf("lab recipe %s: hardware.disks[%d].min_size %v: the lab makes data disks of 1 byte to 4GiB", name, i, d.MinSize)
		}
		for n := max(d.Count, 1); n > 0; n-- {
			hw.DataDisks = append(hw.DataDisks, size)
		}
	}
	return hw, nil
}
