package burnin

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// digitsRe matches a plain decimal count, the first column of table rows.
var digitsRe = regexp.MustCompile(`^\d+$`)

// parseFinite parses a float and rejects NaN and ±Inf, which no tool means
// as a measurement and which JSON cannot carry.
func parseFinite(s string) (float64, error) {
	v, err := parseNumber(s)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("not a finite number")
	}
	return v, nil
}

// parseNumber reads a number as C's printf writes it: 12, 1.5, 1.04858e+06,
// inf, -inf, nan, -nan (glibc prints the sign of a NaN).
func parseNumber(s string) (float64, error) {
	switch strings.ToLower(s) {
	case "nan", "-nan", "+nan":
		return math.NaN(), nil
	case "inf", "+inf", "infinity":
		return math.Inf(1), nil
	case "-inf", "-infinity":
		return math.Inf(-1), nil
	}
	if strings.ContainsAny(s, "xXpP_") { // hex floats and Go's digit separators are no printf %f/%g
		return 0, fmt.Errorf("%q: not a decimal number", s)
	}
	return strconv.ParseFloat(s, 64)
}

// parseRate reads a rate a tool printed; inf and nan (a zero-length
// interval) read as 0, which no check passes on.
func parseRate(s string) (float64, error) {
	v, err := parseNumber(s)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, nil
	}
	return v, nil
}

// parseCount reads a count printed with %d or %g ("96", "1.04858e+06"). A
// %g count is rounded to 6 digits; it is still the count the tool saw, to
// its precision.
func parseCount(s string) (int64, error) {
	if digitsRe.MatchString(strings.TrimPrefix(s, "-")) {
		return strconv.ParseInt(s, 10, 64)
	}
	v, err := parseNumber(s)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) || math.Abs(v) > 1<<62 {
		return 0, fmt.Errorf("%q: expected a count", s)
	}
	return int64(v), nil
}

// errorf is fmt.Errorf, kept short for the many row-level messages.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
