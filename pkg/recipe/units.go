package recipe

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a byte count written with a unit: 512MiB, 80GiB, 2TiB, 1.92TB.
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
	{"B", 1},
}

// ParseSize reads a size such as "80GiB" or "1.92TB". A unit is required.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			b := math.Round(f * u.mult)
			if err != nil || !(b >= 0 && b < math.MaxInt64) {
				break
			}
			return Size(b), nil
		}
	}
	return 0, fmt.Errorf("size %q: expected a number and a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 80GiB", s)
}

// Bytes returns the size in bytes.
func (s Size) Bytes() int64 { return int64(s) }

// String prints the size with the unit that gives the smallest whole
// number: 80GiB, 2TiB, 1TB, 1920GB; bytes when no unit divides it.
func (s Size) String() string {
	best, unit := int64(s), "B"
	for _, u := range sizeUnits {
		m := int64(u.mult)
		if s != 0 && int64(s)%m == 0 && int64(s)/m < best {
			best, unit = int64(s)/m, u.suffix
		}
	}
	return fmt.Sprintf("%d%s", best, unit)
}

// MarshalJSON writes the size as its string form.
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads the string form.
func (s *Size) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size: expected a string such as \"80GiB\"")
	}
	v, err := ParseSize(str)
	*s = v
	return err
}

// Speed is a link speed in megabits per second, written 25Gbps, 400Gbps, 1000Mbps.
type Speed int64

// ParseSpeed reads a speed such as "400Gbps".
func ParseSpeed(s string) (Speed, error) {
	t := strings.TrimSpace(s)
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Tbps", 1e6}, {"Gbps", 1e3}, {"Mbps", 1}} {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			m := math.Round(f * u.mult)
			if err != nil || !(m > 0 && m < math.MaxInt64) {
				break
			}
			return Speed(m), nil
		}
	}
	return 0, fmt.Errorf("speed %q: expected a number and Mbps, Gbps or Tbps, e.g. 400Gbps", s)
}

// Mbps returns the speed in megabits per second.
func (s Speed) Mbps() int64 { return int64(s) }

// String prints the speed in the largest unit that divides it.
func (s Speed) String() string {
	switch {
	case s != 0 && s%1e6 == 0:
		return fmt.Sprintf("%dTbps", int64(s)/1e6)
	case s != 0 && s%1e3 == 0:
		return fmt.Sprintf("%dGbps", int64(s)/1e3)
	}
	return fmt.Sprintf("%dMbps", int64(s))
}

// MarshalJSON writes the speed as its string form.
func (s Speed) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads the string form.
func (s *Speed) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("speed: expected a string such as \"400Gbps\"")
	}
	v, err := ParseSpeed(str)
	*s = v
	return err
}

// Duration is a time.Duration written as Go writes it: 90s, 15m, 2h.
type Duration time.Duration

// ParseDuration reads a duration such as "15m".
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: expected a positive duration such as 90s, 15m or 2h", s)
	}
	return Duration(d), nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String prints the duration as Go does, without zero trailing units:
// 2h, 1h30m, 90s -> 1m30s.
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalJSON writes the duration as its string form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads the string form.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("duration: expected a string such as \"15m\"")
	}
	v, err := ParseDuration(str)
	*d = v
	return err
}

// Value is a typed BIOS attribute value: a string, an integer or a boolean.
// Redfish BIOS attributes are typed, so "1" and 1 are different values.
type Value struct {
	Str  *string `json:"-"`
	Int  *int64  `json:"-"`
	Bool *bool   `json:"-"`
}

// StringValue, IntValue and BoolValue build Values.
func StringValue(s string) Value { return Value{Str: &s} }

// IntValue builds an integer Value.
func IntValue(i int64) Value { return Value{Int: &i} }

// BoolValue builds a boolean Value.
func BoolValue(b bool) Value { return Value{Bool: &b} }

// Any returns the value as string, int64 or bool (nil when unset).
func (v Value) Any() interface{} {
	switch {
	case v.Str != nil:
		return *v.Str
	case v.Int != nil:
		return *v.Int
	case v.Bool != nil:
		return *v.Bool
	}
	return nil
}

// Type names the value's type: string, int or bool.
func (v Value) Type() string {
	switch v.Any().(type) {
	case string:
		return "string"
	case int64:
		return "int"
	case bool:
		return "bool"
	}
	return "unset"
}

// String prints the value; strings unquoted.
func (v Value) String() string { return fmt.Sprint(v.Any()) }

// Equal reports whether two values have the same type and value.
func (v Value) Equal(o Value) bool { return v.Type() == o.Type() && v.Any() == o.Any() }

// MarshalJSON writes the bare value.
func (v Value) MarshalJSON() ([]byte, error) { return json.Marshal(v.Any()) }

// UnmarshalJSON reads a string, integer or boolean.
func (v *Value) UnmarshalJSON(b []byte) error {
	var x interface{}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return err
	}
	switch t := x.(type) {
	case string:
		*v = StringValue(t)
	case bool:
		*v = BoolValue(t)
	case json.Number:
		i, err := t.Int64()
		if err != nil {
			return fmt.Errorf("BIOS value %s: expected an integer, a string or a boolean", t)
		}
		*v = IntValue(i)
	default:
		return fmt.Errorf("BIOS value %s: expected a string, an integer or a boolean", b)
	}
	return nil
}
