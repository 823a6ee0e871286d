package recipe

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unit is what a check's threshold measures (CheckSpec.Unit).
type Unit string

// The units of check thresholds. Count, generation and none are written as
// plain numbers; the others need their unit in the value (400Gbps, 2TiB,
// 350GB/s, 600Tflop/s), so a bare 400 can never be read in the wrong one.
const (
	UnitNone           Unit = "none"             // no physical unit
	UnitCount          Unit = "count"            // devices
	UnitGeneration     Unit = "generation"       // PCIe generation, 1-6
	UnitBytes          Unit = "bytes"            // 512GiB, 2TiB
	UnitBitsPerSecond  Unit = "bits-per-second"  // 100Mbps, 25Gbps, 400Gbps
	UnitBytesPerSecond Unit = "bytes-per-second" // 350GB/s, 20GiB/s
	UnitFlops          Unit = "flops"            // floating-point operations per second: 50000Gflop/s, 600Tflop/s
)

// Physical reports whether a value in the unit must be written with it.
func (u Unit) Physical() bool {
	return u == UnitBytes || u == UnitBitsPerSecond || u == UnitBytesPerSecond || u == UnitFlops
}

// Words names the unit for people: "bits per second".
func (u Unit) Words() string {
	switch u {
	case UnitBytes:
		return "bytes"
	case UnitBitsPerSecond:
		return "bits per second"
	case UnitBytesPerSecond:
		return "bytes per second"
	case UnitFlops:
		return "floating-point operations per second"
	case UnitCount:
		return "a count"
	case UnitGeneration:
		return "a PCIe generation"
	}
	return "a plain number"
}

// suffix is one way of writing a unit: the text after the number and what
// one of it is in the canonical unit.
type suffix struct {
	text string
	mult float64
}

// suffixes lists how each physical unit may be written, largest first
// within each family. The first entry is the one messages suggest.
func (u Unit) suffixes() []suffix {
	switch u {
	case UnitBitsPerSecond:
		return []suffix{{"Gbps", 1e9}, {"Tbps", 1e12}, {"Mbps", 1e6}, {"Kbps", 1e3}, {"bps", 1}}
	case UnitBytesPerSecond:
		out := []suffix{{"GB/s", 1e9}}
		for _, s := range sizeUnits {
			if s.suffix != "GB" {
				out = append(out, suffix{s.suffix + "/s", s.mult})
			}
		}
		return out
	case UnitFlops:
		return []suffix{{"Tflop/s", 1e12}, {"Pflop/s", 1e15}, {"Gflop/s", 1e9}, {"Mflop/s", 1e6}, {"flop/s", 1}}
	case UnitBytes:
		out := []suffix{{"GiB", 1 << 30}}
		for _, s := range sizeUnits {
			if s.suffix != "GiB" {
				out = append(out, suffix{s.suffix, s.mult})
			}
		}
		return out
	}
	return nil
}

// Example writes the number n in the unit, for messages: 400Gbps.
func (u Unit) Example(n string) string {
	if s := u.suffixes(); len(s) > 0 {
		return n + s[0].text
	}
	return n
}

// physicalUnits are tried in this order when reading a value: the per
// second forms before bytes, whose suffix B they end differently from.
var physicalUnits = []Unit{UnitBytesPerSecond, UnitFlops, UnitBitsPerSecond, UnitBytes}

// Quantity is a check threshold: a plain number (a count, a PCIe
// generation) or a physical amount written with its unit. Value is
// canonical whatever the text said: bits/s, bytes, bytes/s or flop/s, so
// 400Gbps is 4e11 and 2TiB is 2^41. Unit is the unit the value was
// written in, empty for a plain number. The zero Quantity is "not given".
//
// In YAML a plain number is an unquoted number (min: 8) and a physical one
// a string (min: 400Gbps); JSON writes them back the same way, so the
// agent API carries the text a recipe author wrote.
type Quantity struct {
	Value float64 `json:"-"`
	Unit  Unit    `json:"-"`
}

// Number is a plain-number Quantity (a count, a generation).
func Number(v float64) Quantity { return Quantity{Value: v} }

// ParseQuantity reads a physical quantity with its unit: 400Gbps, 2TiB,
// 350GB/s, 600Tflop/s. A plain number is refused: it is written as a
// YAML or JSON number, not as text.
func ParseQuantity(s string) (Quantity, error) {
	t := strings.TrimSpace(s)
	for _, u := range physicalUnits {
		for _, sf := range u.suffixes() {
			num, ok := strings.CutSuffix(t, sf.text)
			if !ok {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			v := f * sf.mult
			if err != nil || num == "" || !(v >= 0 && v <= math.MaxFloat64) {
				return Quantity{}, quantityError(s)
			}
			return Quantity{Value: v, Unit: u}, nil
		}
	}
	return Quantity{}, quantityError(s)
}

func quantityError(s string) error {
	return fmt.Errorf("quantity %q: expected a number and a unit: bits per second (Mbps, Gbps, Tbps), "+
		"bytes (MiB, GiB, TiB, GB, TB), bytes per second (GB/s, GiB/s) or flop/s (Gflop/s, Tflop/s), e.g. 400Gbps", s)
}

// IsZero reports whether the quantity is absent (zero).
func (q Quantity) IsZero() bool { return q.Value == 0 }

// String writes the quantity as a recipe would: a plain number, or the
// value in the unit that gives the smallest whole number (400Gbps,
// 2TiB, 350GB/s, 50Tflop/s).
func (q Quantity) String() string {
	sfs := q.Unit.suffixes()
	if len(sfs) == 0 {
		return fmtNum(q.Value)
	}
	best, text := q.Value, ""
	for _, sf := range sfs {
		n := q.Value / sf.mult
		if n == math.Trunc(n) && n*sf.mult == q.Value && (text == "" || n < best) {
			best, text = n, sf.text
		}
	}
	if text == "" { // not a whole number of any unit: the base unit prints exactly
		for _, sf := range sfs {
			if sf.mult == 1 {
				return fmtNum(q.Value) + sf.text
			}
		}
	}
	return fmtNum(best) + text
}

// fmtNum prints a number without an exponent unless it is huge or tiny.
func fmtNum(f float64) string {
	if a := math.Abs(f); a != 0 && (a >= 1e21 || a < 1e-6) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// MarshalJSON writes a plain number as a JSON number and a physical
// quantity as its string form.
func (q Quantity) MarshalJSON() ([]byte, error) {
	if q.Unit == "" {
		return json.Marshal(q.Value)
	}
	return json.Marshal(q.String())
}

// UnmarshalJSON reads a JSON number (a plain number) or a string with a
// unit (see ParseQuantity).
func (q *Quantity) UnmarshalJSON(b []byte) error {
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	switch t := x.(type) {
	case float64:
		if t < 0 {
			return fmt.Errorf("quantity %s: expected a number >= 0", b)
		}
		*q = Number(t)
		return nil
	case string:
		v, err := ParseQuantity(t)
		if err != nil {
			return err
		}
		*q = v
		return nil
	}
	return fmt.Errorf("quantity %s: expected a number or a string such as \"400Gbps\"", b)
}
