package burnin

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// digitsRe matches a plain decimal count, the first column of table rows.
var digitsRe = regexp.MustCompile(`^\d+$`)

// parseFinite parses a float and rejects NaN and ±Inf, which no tool means
// as a measurement and which JSON cannot carry.
func parseFinite(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("not a finite number")
	}
	return v, nil
}

// errorf is fmt.Errorf, kept short for the many row-level messages.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
