// Package credential resolves the BMC credential references stored with a
// machine. The store never holds a password, only where to find one:
//
//	file:/etc/ingot/bmc/node1   a file with "username=NAME" and
//	                            "password=SECRET" lines (or one "NAME:SECRET" line)
//	env:NODE1_BMC               an environment variable holding NAME:SECRET
//	secret:node1-bmc            a secret sealed in ingot's store (pkg/secret)
//	                            holding the same lines as a file
//
// Policy says which of them a server allows.
package credential

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Parse reads a credential's text (username=/password= lines, or one
// NAME:SECRET line); ref names it in errors.
func Parse(ref, text string) (user, password string, err error) { return parse(ref, text) }

// Resolve returns the user name and password a reference points to.
func Resolve(ref string, getenv func(string) string) (user, password string, err error) {
	kind, arg, ok := strings.Cut(ref, ":")
	if !ok || arg == "" {
		return "", "", fmt.Errorf("credential reference %q: expected secret:NAME, file:PATH or env:VARIABLE", ref)
	}
	switch kind {
	case "env":
		v := getenv(arg)
		if v == "" {
			return "", "", fmt.Errorf("credential reference %s: variable %s is empty or unset", ref, arg)
		}
		return parse(ref, v)
	case "file":
		b, err := os.ReadFile(arg)
		if err != nil {
			return "", "", fmt.Errorf("credential reference %s: %w", ref, err)
		}
		return parse(ref, string(b))
	}
	return "", "", fmt.Errorf("credential reference %q: unknown kind %q; expected file:PATH or env:VARIABLE (secret:NAME is opened by the server)", ref, kind)
}

func parse(ref, text string) (user, password string, err error) {
	s := bufio.NewScanner(strings.NewReader(text))
	lines := 0
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lines++
		switch k, v, _ := strings.Cut(line, "="); k {
		case "username", "user":
			user = v
			continue
		case "password":
			password = v
			continue
		}
		if u, p, ok := strings.Cut(line, ":"); ok && lines == 1 {
			user, password = u, p
		}
	}
	if user == "" || password == "" {
		return "", "", fmt.Errorf("credential reference %s: expected username= and password= lines, or one NAME:SECRET line", ref)
	}
	return user, password, nil
}
