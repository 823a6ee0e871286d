package lldp

import (
	"encoding/binary"
	"net"
)

// The frames tests send and parse, built the way switches lay them out
// (802.1AB-2016 8.4: a 7-bit type and a 9-bit length, then the value).

func tlv(typ int, v ...byte) []byte {
	return append([]byte{byte(typ<<1 | len(v)>>8), byte(len(v))}, v...)
}

// frame is an Ethernet frame to the nearest-bridge address carrying tlvs.
func frame(tlvs ...[]byte) []byte {
	return frameTo(groups[0], tlvs...)
}

func frameTo(dst [6]byte, tlvs ...[]byte) []byte {
	b := append(dst[:], 0x02, 0x1c, 0x73, 0x00, 0x00, 0x99)
	b = binary.BigEndian.AppendUint16(b, EtherType)
	for _, t := range tlvs {
		b = append(b, t...)
	}
	return b
}

func mac(s string) []byte {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func chassisMAC(s string) []byte { return tlv(tlvChassisID, append([]byte{4}, mac(s)...)...) }
func chassisID(sub byte, v ...byte) []byte {
	return tlv(tlvChassisID, append([]byte{sub}, v...)...)
}
func portName(s string) []byte { return tlv(tlvPortID, append([]byte{5}, s...)...) }
func portID(sub byte, v ...byte) []byte {
	return tlv(tlvPortID, append([]byte{sub}, v...)...)
}
func ttl(s uint16) []byte             { return tlv(tlvTTL, byte(s>>8), byte(s)) }
func portDescr(s string) []byte       { return tlv(tlvPortDescr, []byte(s)...) }
func systemName(s string) []byte      { return tlv(tlvSystemName, []byte(s)...) }
func systemDescr(s string) []byte     { return tlv(6, []byte(s)...) }
func pvid(v uint16) []byte            { return tlv(tlvOrg, 0x00, 0x80, 0xc2, 1, byte(v>>8), byte(v)) }
func end() []byte                     { return tlv(tlvEnd) }
func org(v ...byte) []byte            { return tlv(tlvOrg, v...) }
func capabilities(s, e uint16) []byte { return tlv(7, byte(s>>8), byte(s), byte(e>>8), byte(e)) }

// switchFrame is what a leaf switch sends on the port a GPU node's eth0
// is cabled to.
func switchFrame() []byte {
	return frame(chassisMAC("28:99:3a:4d:12:00"), portName("Ethernet12/1"), ttl(120),
		portDescr("gpu-node-07 eth0"), systemName("leaf-r12-a"), systemDescr("Arista Networks EOS version 4.30"),
		capabilities(0x14, 0x14), pvid(100), end())
}

func net16(s string) []byte { return net.ParseIP(s).To16() }
