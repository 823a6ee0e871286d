// Package lldp tells the agent which switch port each NIC is cabled to: it
// parses the LLDP frames (IEEE 802.1AB) switches send on every port and
// listens for them on the machine's interfaces with packet sockets.
//
// Parse is pure and never panics on any input (FuzzParse); Listen and
// Listener are the thin socket layer around it.
package lldp

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// EtherType is LLDP's Ethernet type.
const EtherType = 0x88cc

// groups are the destination addresses an LLDPDU is sent to (802.1AB-2016
// 7.1): nearest bridge (what switches send), nearest non-TPMR bridge and
// nearest customer bridge.
var groups = [...][6]byte{
	{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e},
	{0x01, 0x80, 0xc2, 0x00, 0x00, 0x03},
	{0x01, 0x80, 0xc2, 0x00, 0x00, 0x00},
}

// TLV types (802.1AB-2016 8.4.1). Types 6-8 (system description,
// capabilities, management address) and reserved ones are skipped.
const (
	tlvEnd        = 0
	tlvChassisID  = 1
	tlvPortID     = 2
	tlvTTL        = 3
	tlvPortDescr  = 4
	tlvSystemName = 5
	tlvOrg        = 127
)

// FrameError is a frame Parse refused: the part (a TLV or the Ethernet
// header), its byte offset in the frame, and what was wrong.
type FrameError struct {
	Part   string // "Chassis ID TLV", "Ethernet header", ...
	Offset int
	Reason string
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("LLDP frame: %s at offset %d: %s", e.Part, e.Offset, e.Reason)
}

// Parse reads the neighbour an Ethernet frame carrying an LLDPDU announces.
// The LLDPDU must start with the Chassis ID, Port ID and TTL TLVs, each TLV
// must fit the frame, and the mandatory and the recorded optional TLVs may
// appear once; an End TLV is optional (the frame may simply end).
func Parse(frame []byte) (machine.LLDPNeighbor, error) {
	du, err := parse(frame)
	if err != nil {
		return machine.LLDPNeighbor{}, err
	}
	return du.LLDPNeighbor, nil
}

// lldpdu is a parsed frame: the neighbour and its time to live (0 means
// the neighbour is going away).
type lldpdu struct {
	machine.LLDPNeighbor
	TTL int
}

func parse(frame []byte) (lldpdu, error) {
	off, err := payload(frame)
	if err != nil {
		return lldpdu{}, err
	}
	var du lldpdu
	var seen [tlvOrg + 1]bool
	for n := 0; off < len(frame); n++ {
		if len(frame)-off < 2 {
			return du, &FrameError{"TLV header", off, "1 byte left, a TLV header takes 2"}
		}
		typ, l := int(frame[off]>>1), int(frame[off]&1)<<8|int(frame[off+1])
		part := tlvName(typ)
		if left := len(frame) - off - 2; l > left {
			return du, &FrameError{part, off, fmt.Sprintf("length %d runs past the frame's end (%d bytes left)", l, left)}
		}
		if n < 3 && typ != n+1 {
			return du, &FrameError{part, off, "expected the " + tlvName(n+1) + " here: an LLDPDU starts with Chassis ID, Port ID and TTL"}
		}
		if typ >= tlvChassisID && typ <= tlvSystemName {
			if seen[typ] {
				return du, &FrameError{part, off, "a second one, where an LLDPDU carries at most one"}
			}
			seen[typ] = true
		}
		if typ == tlvEnd {
			if l != 0 {
				return du, &FrameError{part, off, fmt.Sprintf("length %d, expected 0", l)}
			}
			return du, nil
		}
		if reason := du.set(typ, frame[off+2:off+2+l]); reason != "" {
			return du, &FrameError{part, off, reason}
		}
		off += 2 + l
	}
	if !seen[tlvTTL] {
		return du, &FrameError{"LLDPDU", off, "ends before the Chassis ID, Port ID and TTL TLVs"}
	}
	return du, nil
}

// payload checks the Ethernet header (destination, EtherType after any
// 802.1Q/802.1ad tags) and returns the offset of the LLDPDU.
func payload(frame []byte) (int, error) {
	if len(frame) < 14 {
		return 0, &FrameError{"Ethernet header", 0, fmt.Sprintf("frame of %d bytes, an Ethernet header takes 14", len(frame))}
	}
	dst := [6]byte(frame[:6])
	ok := false
	for _, g := range groups {
		ok = ok || dst == g
	}
	if !ok {
		return 0, &FrameError{"Ethernet header", 0, fmt.Sprintf("destination %s is not an LLDP address (01:80:c2:00:00:0e, 03 or 00)", net.HardwareAddr(frame[:6]))}
	}
	off := 12
	for tags := 0; ; tags++ {
		switch et := binary.BigEndian.Uint16(frame[off:]); {
		case (et == 0x8100 || et == 0x88a8) && tags < 2:
			if len(frame) < off+6 {
				return 0, &FrameError{"Ethernet header", off, "the frame ends inside this VLAN tag"}
			}
			off += 4
		case et == EtherType:
			return off + 2, nil
		default:
			return 0, &FrameError{"Ethernet header", off, fmt.Sprintf("EtherType %#04x, expected LLDP %#04x", et, EtherType)}
		}
	}
}

// set records one TLV's value; it returns why the value is wrong, or "".
func (du *lldpdu) set(typ int, v []byte) string {
	var err string
	switch typ {
	case tlvChassisID:
		du.ChassisID, err = id(v, chassisKinds)
	case tlvPortID:
		du.PortID, err = id(v, portKinds)
	case tlvTTL:
		if len(v) != 2 {
			return fmt.Sprintf("length %d, expected 2", len(v))
		}
		du.TTL = int(binary.BigEndian.Uint16(v))
	case tlvPortDescr:
		du.PortDescr = text(v)
	case tlvSystemName:
		du.SystemName = text(v)
	case tlvOrg:
		return du.org(v)
	}
	return err
}

// org reads an organizationally specific TLV: only IEEE 802.1's Port VLAN
// ID (OUI 00-80-C2, subtype 1; 802.1Q-2018 D.2.1) is recorded.
func (du *lldpdu) org(v []byte) string {
	if len(v) < 4 {
		return fmt.Sprintf("length %d, expected an OUI and a subtype (4 bytes or more)", len(v))
	}
	if [3]byte(v[:3]) != [3]byte{0x00, 0x80, 0xc2} || v[3] != 1 {
		return ""
	}
	if len(v) != 6 {
		return fmt.Sprintf("IEEE 802.1 Port VLAN ID of length %d, expected 6", len(v))
	}
	vid := int(binary.BigEndian.Uint16(v[4:]))
	if vid > 4094 {
		return fmt.Sprintf("IEEE 802.1 Port VLAN ID %d, expected 0 (none) to 4094", vid)
	}
	du.VLAN = vid
	return ""
}

// The kinds of ID a Chassis ID or Port ID subtype holds (802.1AB-2016
// 8.5.2.2 and 8.5.3.2). Subtypes not listed (reserved) are shown in hex.
const (
	kindText = iota + 1 // alias, component, interface name, locally assigned
	kindMAC
	kindNetwork // an IANA address family number and the address
	kindBinary  // agent circuit ID (RFC 3046): text when printable
)

var (
	chassisKinds = map[byte]int{1: kindText, 2: kindText, 3: kindText, 4: kindMAC, 5: kindNetwork, 6: kindText, 7: kindText}
	portKinds    = map[byte]int{1: kindText, 2: kindText, 3: kindMAC, 4: kindNetwork, 5: kindText, 6: kindBinary, 7: kindText}
)

// id renders a Chassis ID or Port ID value (a subtype and 1-255 bytes):
// a MAC address in colon form, a network address as an IP, names as text.
func id(v []byte, kinds map[byte]int) (string, string) {
	if len(v) < 2 || len(v) > 256 {
		return "", fmt.Sprintf("length %d, expected a subtype and 1 to 255 bytes", len(v))
	}
	sub, b := v[0], v[1:]
	switch kinds[sub] {
	case kindMAC:
		if len(b) != 6 && len(b) != 8 {
			return "", fmt.Sprintf("MAC address subtype with %d bytes, expected 6 (or 8)", len(b))
		}
		return net.HardwareAddr(b).String(), ""
	case kindNetwork:
		if a, ok := netip.AddrFromSlice(b[1:]); ok && (b[0] == 1 && a.Is4() || b[0] == 2 && a.Is6()) {
			return a.String(), ""
		}
		return "", fmt.Sprintf("network address subtype with family %d and %d address bytes, expected IPv4 (1, 4 bytes) or IPv6 (2, 16 bytes)", b[0], len(b)-1)
	case kindText, kindBinary:
		if s := strings.TrimRight(string(b), "\x00"); printable(s) && s != "" {
			return s, ""
		}
	}
	return hex.EncodeToString(b), ""
}

// text renders a string TLV (port description, system name): trailing NULs
// some switches send are dropped, invalid UTF-8 and control characters
// replaced, so what a switch says cannot garble a console or a report.
func text(b []byte) string {
	s := strings.ToValidUTF8(strings.TrimRight(string(b), "\x00"), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func tlvName(typ int) string {
	switch typ {
	case tlvEnd:
		return "End TLV"
	case tlvChassisID:
		return "Chassis ID TLV"
	case tlvPortID:
		return "Port ID TLV"
	case tlvTTL:
		return "TTL TLV"
	case tlvPortDescr:
		return "Port Description TLV"
	case tlvSystemName:
		return "System Name TLV"
	case tlvOrg:
		return "Organizationally Specific TLV"
	}
	return fmt.Sprintf("TLV type %d", typ)
}
