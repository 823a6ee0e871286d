package machine

import (
	"errors"
	"fmt"
	"strings"
)

// CheckDNSName says why name is not DNS-style (lower-case letters, digits,
// '-' and '.', labels of 1-63 characters not starting or ending with '-',
// 253 characters in all), or returns nil: the rule for machine ids and
// names, secret names, and anything else that ends up in a kernel command
// line, an iPXE script or a file name.
func CheckDNSName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("empty or longer than 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("a label is empty or longer than 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("a label starts or ends with '-'")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("%q is not allowed", r)
			}
		}
	}
	return nil
}
