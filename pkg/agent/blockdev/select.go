package blockdev

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Match reports whether d satisfies spec, and if not, why.
// Path is compared after the caller resolved symlinks (by-path, by-id).
func Match(d Disk, spec recipe.DiskSpec) (bool, string) {
	switch {
	case spec.Path != "" && spec.Path != d.Path && spec.Path != d.Name:
		return false, fmt.Sprintf("path %s is not %s", d.Path, spec.Path)
	case d.Size <= 0:
		return false, "size 0 (no medium)"
	case d.ReadOnly:
		return false, "read-only"
	case d.Removable && spec.Path == "":
		return false, "removable (name it by path to use it)"
	case spec.MinSize > 0 && d.Size < spec.MinSize.Bytes():
		return false, fmt.Sprintf("size %s is below min_size %s", recipe.Size(d.Size), spec.MinSize)
	case spec.MaxSize > 0 && d.Size > spec.MaxSize.Bytes():
		return false, fmt.Sprintf("size %s is above max_size %s", recipe.Size(d.Size), spec.MaxSize)
	case spec.Model != "" && !strings.Contains(strings.ToLower(d.Model), strings.ToLower(spec.Model)):
		return false, fmt.Sprintf("model %q does not contain %q", d.Model, spec.Model)
	case spec.Serial != "" && d.Serial != spec.Serial:
		return false, fmt.Sprintf("serial %q is not %q", d.Serial, spec.Serial)
	case spec.Media != "" && !strings.EqualFold(spec.Media, d.Media()):
		return false, fmt.Sprintf("media %s is not %s", d.Media(), strings.ToLower(spec.Media))
	}
	return true, ""
}

// Select chooses the disk the image goes to: among the disks matching spec,
// the smallest (the usual boot-disk rule: a small mirrored M.2 before big data
// NVMe drives), ties broken by name. The error lists every disk and why it
// was refused.
func Select(disks []Disk, spec recipe.DiskSpec) (Disk, error) {
	var ok []Disk
	var why []string
	for _, d := range disks {
		if m, reason := Match(d, spec); m {
			ok = append(ok, d)
		} else {
			why = append(why, fmt.Sprintf("%s: %s", d.Name, reason))
		}
	}
	if len(ok) == 0 {
		if len(disks) == 0 {
			return Disk{}, fmt.Errorf("selecting the boot disk: no disks found (is the storage driver loaded?)")
		}
		return Disk{}, fmt.Errorf("selecting the boot disk: no disk matches %s: %s", describe(spec), strings.Join(why, "; "))
	}
	sort.SliceStable(ok, func(i, j int) bool {
		if ok[i].Size != ok[j].Size {
			return ok[i].Size < ok[j].Size
		}
		return ok[i].Name < ok[j].Name
	})
	return ok[0], nil
}

func describe(s recipe.DiskSpec) string {
	var p []string
	add := func(k, v string) {
		if v != "" && v != "0B" {
			p = append(p, k+"="+v)
		}
	}
	add("path", s.Path)
	if s.MinSize > 0 {
		add("min_size", s.MinSize.String())
	}
	if s.MaxSize > 0 {
		add("max_size", s.MaxSize.String())
	}
	add("model", s.Model)
	add("serial", s.Serial)
	add("media", s.Media)
	if len(p) == 0 {
		return "{any disk}"
	}
	return "{" + strings.Join(p, " ") + "}"
}
