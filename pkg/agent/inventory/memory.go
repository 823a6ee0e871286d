package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// readDIMMs reads the SMBIOS type 17 records (the same DIMMs a BMC lists).
// Without an SMBIOS table it returns one entry, slot "system", holding the
// online memory from /sys/devices/system/memory (or MemTotal), so memory
// checks still have a total.
func readDIMMs(root string) ([]machine.DIMM, error) {
	table, err := os.ReadFile(filepath.Join(root, "sys/firmware/dmi/tables/DMI"))
	if err == nil {
		dimms, perr := ParseSMBIOSMemory(table)
		if perr == nil && len(dimms) > 0 {
			return dimms, nil
		}
	}
	mib, err := systemMemoryMiB(root)
	if err != nil {
		return nil, err
	}
	return []machine.DIMM{{Slot: "system", SizeMiB: mib}}, nil
}

// systemMemoryMiB is the online memory blocks' total, or MemTotal.
func systemMemoryMiB(root string) (int64, error) {
	dir := filepath.Join(root, "sys/devices/system/memory")
	if bs, err := strconv.ParseInt(readString(dir, "block_size_bytes"), 16, 64); err == nil && bs > 0 {
		ents, _ := os.ReadDir(dir)
		var n int64
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "memory") && readString(filepath.Join(dir, e.Name()), "online") == "1" {
				n++
			}
		}
		if n > 0 {
			return n * bs >> 20, nil
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return 0, fmt.Errorf("reading meminfo: %w", err)
	}
	kib, err := ParseMemTotal(b)
	return kib >> 10, err
}

// ParseMemTotal returns MemTotal from /proc/meminfo, in KiB.
func ParseMemTotal(b []byte) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("meminfo: no MemTotal line")
}

// SMBIOS memory types (DSP0134 7.18.2) as Redfish names them.
var smbiosMemType = map[byte]string{
	0x12: "DDR", 0x13: "DDR2", 0x18: "DDR3", 0x1a: "DDR4", 0x1b: "LPDDR", 0x1c: "LPDDR2",
	0x1d: "LPDDR3", 0x1e: "LPDDR4", 0x20: "HBM", 0x21: "HBM2", 0x22: "DDR5", 0x23: "LPDDR5", 0x24: "HBM3",
}

// ParseSMBIOSMemory reads the installed memory devices (type 17 records with
// a size) from a raw SMBIOS structure table (/sys/firmware/dmi/tables/DMI).
// It never panics on malformed input and stops at the end-of-table record.
func ParseSMBIOSMemory(t []byte) ([]machine.DIMM, error) {
	var out []machine.DIMM
	for i := 0; i+4 <= len(t); {
		typ, n := t[i], int(t[i+1])
		if n < 4 || i+n > len(t) {
			return out, fmt.Errorf("smbios: record at %d has length %d past the table's %d bytes", i, n, len(t))
		}
		f := t[i : i+n]
		// Strings follow the formatted area, each NUL-terminated, the set ended by a second NUL.
		j := i + n
		var strs []string
		if j+1 < len(t) && t[j] == 0 && t[j+1] == 0 {
			j += 2
		} else {
			for j < len(t) && t[j] != 0 {
				k := j
				for k < len(t) && t[k] != 0 {
					k++
				}
				strs = append(strs, string(t[j:k]))
				j = k + 1
			}
			j++
		}
		str := func(off int) string {
			if off >= len(f) || f[off] == 0 || int(f[off]) > len(strs) {
				return ""
			}
			return clean(strs[f[off]-1])
		}
		if typ == 127 {
			break
		}
		if typ == 17 && n >= 0x15 {
			if d, ok := dimm(f, str); ok {
				out = append(out, d)
			}
		}
		i = j
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Slot < out[b].Slot })
	return out, nil
}

func dimm(f []byte, str func(int) string) (machine.DIMM, bool) {
	u16 := func(o int) int {
		if o+2 > len(f) {
			return 0
		}
		return int(f[o]) | int(f[o+1])<<8
	}
	size := int64(u16(0x0c))
	switch {
	case size == 0 || size == 0xffff:
		return machine.DIMM{}, false // empty slot or unknown
	case size == 0x7fff && len(f) >= 0x20:
		size = int64(u16(0x1c)) | int64(u16(0x1e))<<16 // extended size, MiB
	case size&0x8000 != 0:
		size = (size & 0x7fff) >> 10 // KiB
	}
	if size <= 0 {
		return machine.DIMM{}, false // under 1 MiB: not a real module
	}
	speed := u16(0x15)
	if c := u16(0x20); len(f) >= 0x22 && c != 0 && c != 0xffff {
		speed = c // configured speed
	}
	d := machine.DIMM{
		Slot:     str(0x10),
		SizeMiB:  size,
		Type:     smbiosMemType[f[0x12]],
		SpeedMHz: speed,
		Vendor:   str(0x17),
		Serial:   str(0x18),
	}
	if d.Slot == "" {
		d.Slot = str(0x11)
	}
	return d, true
}

func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "not specified", "unknown", "no dimm", "none", "to be filled by o.e.m.":
		return ""
	}
	return s
}
