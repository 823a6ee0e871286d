#!/usr/bin/env python3
"""Regenerates testdata/gpu-node, a fake /sys and /proc of a 2-socket node
with two H100s (one on a degraded x8 link), a BMC VGA, a ConnectX-7 port and
an NVMe drive. Run from this directory: ./mktree.py"""
import os, shutil, struct

R = "gpu-node"
shutil.rmtree(R, ignore_errors=True)

def w(path, data, binary=False):
    p = os.path.join(R, path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb" if binary else "w") as f:
        f.write(data)

def ln(target, path):
    p = os.path.join(R, path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    os.symlink(target, p)

for k, v in {"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR", "product_serial": "S123456X",
             "product_uuid": "0F6E0A2C-1B3D-4E5F-8A9B-0C1D2E3F4A5B", "bios_version": "2.1"}.items():
    w("sys/class/dmi/id/" + k, v + "\n")

cpu = ""
n = 0
for sock in (0, 1):
    for core in (0, 1):
        for thr in (0, 1):
            cpu += ("processor\t: %d\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
                    "physical id\t: %d\nsiblings\t: 4\ncore id\t\t: %d\ncpu cores\t: 2\ncpu MHz\t\t: 2000.000\n\n") % (n, sock, core)
            n += 1
w("proc/cpuinfo", cpu)
w("sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "3800000\n")
w("proc/meminfo", "MemTotal:       131072000 kB\nMemFree:        1 kB\n")
w("sys/devices/system/memory/block_size_bytes", "8000000\n")
for i in range(4):
    w("sys/devices/system/memory/memory%d/online" % i, "1\n")

def t17(locator, size_mib, mtype, speed, vendor, serial):
    strings = [locator, "BANK 0", vendor, serial]
    size = 0x7fff if size_mib >= 0x7fff else size_mib
    f = struct.pack("<BBH", 17, 0x28, 0x1100)
    f += struct.pack("<HHHHHBBBBBHHBBBBBIH", 0x1000, 0xfffe, 72, 64, size, 0x09, 0, 1, 2, mtype, 0x80, speed, 3, 4, 0, 0, 0, size_mib, speed)
    f += b"\x00" * (0x28 - len(f))
    return f + b"\x00".join(s.encode() for s in strings) + b"\x00\x00"

table = t17("P0 DIMMA1", 65536, 0x22, 4800, "Samsung", "S0001")
table += t17("P1 DIMMA1", 65536, 0x22, 4800, "Samsung", "S0002")
table += t17("P1 DIMMB1", 0, 0x02, 0, "NO DIMM", "NO DIMM")  # empty slot
table += struct.pack("<BBH", 127, 4, 0xffff) + b"\x00\x00"
w("sys/firmware/dmi/tables/DMI", table, binary=True)

def pci(addr, vendor, device, cls, link=None):
    d = "sys/bus/pci/devices/" + addr + "/"
    w(d + "vendor", vendor + "\n"); w(d + "device", device + "\n"); w(d + "class", cls + "\n")
    if link:
        cs, cw, ms, mw = link
        w(d + "current_link_speed", cs + "\n"); w(d + "current_link_width", cw + "\n")
        w(d + "max_link_speed", ms + "\n"); w(d + "max_link_width", mw + "\n")

pci("0000:17:00.0", "0x10de", "0x2330", "0x030200", ("32.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"))
pci("0000:3d:00.0", "0x10de", "0x2330", "0x030200", ("32.0 GT/s PCIe", "8", "32.0 GT/s PCIe", "16"))
pci("0000:03:00.0", "0x1a03", "0x2000", "0x030000", ("2.5 GT/s PCIe", "1", "2.5 GT/s PCIe", "1"))
pci("0000:4b:00.0", "0x15b3", "0x1021", "0x020000", ("32.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"))
w("sys/bus/pci/slots/11/address", "0000:17:00\n")
os.makedirs(os.path.join(R, "sys/bus/pci/drivers/mlx5_core"))
ln("../../../../bus/pci/drivers/mlx5_core", "sys/bus/pci/devices/0000:4b:00.0/driver")

ln("../../../bus/pci/devices/0000:4b:00.0", "sys/class/net/ens1np0/device")
w("sys/class/net/ens1np0/address", "b8:3f:d2:00:00:01\n")
w("sys/class/net/ens1np0/speed", "400000\n")
w("sys/class/net/ens1np0/carrier", "1\n")
w("sys/class/net/lo/address", "00:00:00:00:00:00\n")
w("sys/class/net/br0/address", "02:00:00:00:00:01\n")

w("sys/block/nvme0n1/size", "937703088\n")
w("sys/block/nvme0n1/queue/rotational", "0\n")
w("sys/block/nvme0n1/removable", "0\n")
w("sys/block/nvme0n1/device/model", "Micron_7450_MTFDKBA480TFR\n")
w("sys/block/nvme0n1/device/serial", "2233ABCD\n")
w("sys/block/nvme0n1/device/state", "live\n")
w("sys/block/loop0/size", "0\n")

w("nvidia-smi.csv",
  "00000000:17:00.0, NVIDIA H100 80GB HBM3, 1650123456789, 81559, 96.00.99.00.01, 5, 5, 16, 16\n"
  "00000000:3D:00.0, NVIDIA H100 80GB HBM3, 1650123456790, 81559, 96.00.99.00.01, 5, 5, 8, 16\n")
