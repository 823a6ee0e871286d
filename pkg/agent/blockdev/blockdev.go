// Package blockdev lists a machine's disks from sysfs and chooses the one a
// recipe's boot DiskSpec selects. Listing reads files under a root directory
// ("/" on a machine, a fake tree in tests); selection is a pure function.
package blockdev

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Disk is one whole block device as /sys/block shows it.
type Disk struct {
	Name       string // nvme0n1
	Path       string // /dev/nvme0n1
	Size       int64  // bytes
	Model      string
	Serial     string
	Rotational bool
	Removable  bool
	ReadOnly   bool
	Driver     string // nvme, virtio_blk, sd (ahci), ...
	State      string // device/state when present: live, running, ...
}

// Media is "nvme", "hdd" or "ssd".
func (d Disk) Media() string {
	switch {
	case strings.HasPrefix(d.Name, "nvme"):
		return "nvme"
	case d.Rotational:
		return "hdd"
	}
	return "ssd"
}

// skipped prefixes of virtual or unsuitable block devices.
var virtual = []string{"loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd", "drbd"}

// List reads ROOT/sys/block and returns the whole disks, sorted by name.
// Virtual devices (loop, ram, zram, dm, md, optical) are left out.
func List(root string) ([]Disk, error) {
	dir := filepath.Join(root, "sys/block")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing disks in %s: %w", dir, err)
	}
	var disks []Disk
	for _, e := range ents {
		name := e.Name()
		if hasAnyPrefix(name, virtual) {
			continue
		}
		disks = append(disks, read(filepath.Join(dir, name), name))
	}
	sort.Slice(disks, func(i, j int) bool { return disks[i].Name < disks[j].Name })
	return disks, nil
}

func read(dir, name string) Disk {
	d := Disk{Name: name, Path: "/dev/" + name}
	if n, err := strconv.ParseInt(readString(dir, "size"), 10, 64); err == nil {
		d.Size = n * 512 // always 512-byte sectors, whatever the logical block size
	}
	d.Rotational = readString(dir, "queue/rotational") == "1"
	d.Removable = readString(dir, "removable") == "1"
	d.ReadOnly = readString(dir, "ro") == "1"
	d.Model = clean(firstOf(dir, "device/model", "device/device/model"))
	d.Serial = clean(firstOf(dir, "device/serial", "serial", "device/device/serial"))
	if d.Serial == "" {
		d.Serial = vpdSerial(filepath.Join(dir, "device/vpd_pg80"))
	}
	d.State = firstOf(dir, "device/state")
	if l, err := os.Readlink(filepath.Join(dir, "device/driver")); err == nil {
		d.Driver = filepath.Base(l)
	} else if l, err := os.Readlink(filepath.Join(dir, "device/device/driver")); err == nil {
		d.Driver = filepath.Base(l)
	}
	return d
}

// vpdSerial reads the unit serial number from a SCSI VPD page 0x80 (4-byte
// header, then the serial).
func vpdSerial(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 4 || b[1] != 0x80 {
		return ""
	}
	n := int(b[2])<<8 | int(b[3])
	return clean(string(b[4:min(len(b), 4+n)]))
}

func firstOf(dir string, names ...string) string {
	for _, n := range names {
		if s := readString(dir, n); s != "" {
			return s
		}
	}
	return ""
}

func readString(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func clean(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s))
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
