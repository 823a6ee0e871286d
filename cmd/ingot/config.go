package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// Config is the CLI's config file: named contexts (a server, its token
// file and CA) and the one in use, the way kubectl's contexts work.
//
//	current-context: lab
//	contexts:
//	  lab: {server: "http://10.77.0.1:8080", token-file: /var/lib/ingot-lab/token}
//	  dc1: {server: "https://ingot.mgmt:8443", token-file: ~/.config/ingot/dc1.token, ca: ~/.config/ingot/dc1-ca.pem}
type Config struct {
	CurrentContext string             `yaml:"current-context,omitempty"`
	Contexts       map[string]Context `yaml:"contexts,omitempty"`
}

// Context is one server to talk to.
type Context struct {
	Server    string `yaml:"server"`
	TokenFile string `yaml:"token-file,omitempty"`
	CA        string `yaml:"ca,omitempty"`
}

func (c Config) names() []string {
	var out []string
	for n := range c.Contexts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// configPath is $INGOT_CONFIG, else ~/.config/ingot/config.yaml.
func configPath(e *env) string {
	if p := e.getenv("INGOT_CONFIG"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".config", "ingot", "config.yaml")
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("reading config %s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("config %s: %v (expected current-context and contexts: NAME: {server, token-file, ca})", path, err)
	}
	return c, nil
}

func saveConfig(path string, c Config) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return durable.WriteFile(path, b, 0o600)
}

const configUsage = `Usage: ingot config COMMAND

  set-context NAME --server URL [--token-file F] [--ca F]   add or change a context
  use-context NAME                                          make it the current one
  current-context                                           print the current one
  view                                                      print the config file

The file is $INGOT_CONFIG or ~/.config/ingot/config.yaml.
`

// runConfig implements `ingot config`.
func runConfig(_ context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(e.stderr, configUsage)
		return errUsage
	}
	path := configPath(e)
	c, err := loadConfig(path)
	if err != nil {
		return err
	}
	switch args[0] {
	case "set-context":
		return configSetContext(e, path, c, args[1:])
	case "use-context":
		if len(args) != 2 {
			return fmt.Errorf("config use-context: expected NAME, got %q", args[1:])
		}
		if _, ok := c.Contexts[args[1]]; !ok {
			return fmt.Errorf("config use-context: no context %q in %s (have %v)", args[1], path, c.names())
		}
		c.CurrentContext = args[1]
		return saveConfig(path, c)
	case "current-context":
		fmt.Fprintln(e.stdout, c.CurrentContext)
		return nil
	case "view":
		b, _ := yaml.Marshal(c)
		_, err := e.stdout.Write(b)
		return err
	}
	fmt.Fprintf(e.stderr, "ingot config: unknown command %q\n\n%s", args[0], configUsage)
	return errUsage
}

func configSetContext(e *env, path string, c Config, args []string) error {
	fs := e.flagSet("config set-context", "config set-context NAME --server URL [--token-file F] [--ca F]")
	server := fs.String("server", "", "server URL")
	tokenFile := fs.String("token-file", "", "file holding the operator token")
	ca := fs.String("ca", "", "PEM file of the server's CA")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return fmt.Errorf("config set-context: %w", err)
	}
	ctx := c.Contexts[pos[0]]
	ctx.Server = firstNonEmpty(*server, ctx.Server)
	ctx.TokenFile = firstNonEmpty(*tokenFile, ctx.TokenFile)
	ctx.CA = firstNonEmpty(*ca, ctx.CA)
	if ctx.Server == "" {
		return fmt.Errorf("config set-context %s: --server is required for a new context", pos[0])
	}
	if c.Contexts == nil {
		c.Contexts = map[string]Context{}
	}
	c.Contexts[pos[0]] = ctx
	if c.CurrentContext == "" {
		c.CurrentContext = pos[0]
	}
	return saveConfig(path, c)
}
