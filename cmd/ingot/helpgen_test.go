package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ingot-dev/ingot/pkg/serve"
)

func generate(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	if err := runEnv(context.Background(), e, args); err != nil {
		t.Fatalf("ingot %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

func TestParseFlags(t *testing.T) {
	help := "Usage: ingot x\n\n  -ca string\n    \tPEM file\n  -o string\n    \toutput format (default \"table\")\n" +
		"  -q\tquiet\n  -wait\n    \twait for it\n    \tacross two lines\n  --not-a-flag\n"
	want := []flagDoc{{"ca", "string", "PEM file"}, {"o", "string", `output format (default "table")`}, {"q", "", "quiet"},
		{"wait", "", "wait for it across two lines"}}
	if d := cmp.Diff(want, parseFlags(help)); d != "" {
		t.Errorf("flags (-want +got):\n%s", d)
	}
}

// The man page names every command and the subcommands with their own
// help, is the same from run to run, and no INGOT_* variable of the build
// host leaks into it.
func TestHelpMan(t *testing.T) {
	env := map[string]string{"SOURCE_DATE_EPOCH": "1700000000"}
	man := generate(t, env, "help-man")
	t.Setenv("INGOT_SERVER", "https://leak.example:1")
	t.Setenv("INGOT_HTTP_ADDR", ":1")
	if again := generate(t, env, "help-man"); again != man {
		t.Error("a second run (with INGOT_* set) differs")
	}
	for _, c := range commands() {
		if !strings.Contains(man, `.SS "ingot `+roff(c.name)+`"`) {
			t.Errorf("no section for ingot %s", c.name)
		}
	}
	for _, want := range []string{`.TH INGOT 1 "2023-11-14"`, `.SS "ingot machine add"`, `.SS "ingot image build"`, `.SS "ingot lab up"`,
		`\-interface string`, `.I /etc/ingot/ingot.yaml`} {
		if !strings.Contains(man, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	for _, l := range strings.Split(man, "\n") {
		if strings.HasPrefix(l, "'") || (strings.HasPrefix(l, ".") && !regexp.MustCompile(`^\.(\\"|TH|SH|SS|PP|nf|fi|TP|I|B|BR) ?`).MatchString(l)) {
			t.Errorf("line %q would be read as a roff request", l)
		}
	}
	if _, err := buildDate(func(string) string { return "yesterday" }); err == nil {
		t.Error("SOURCE_DATE_EPOCH=yesterday accepted")
	}
}

// The completion, run by a real bash, offers commands, subcommands and the
// flags of the command being typed.
func TestHelpCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash not found: the completion is for bash")
	}
	script := filepath.Join(t.TempDir(), "ingot")
	if err := os.WriteFile(script, []byte(generate(t, nil, "help-completion", "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		words []string
		want  string
	}{
		"command":           {[]string{"ingot", "mach"}, "machine"},
		"subcommand":        {[]string{"ingot", "machine", "set"}, "set-recipe"},
		"subcommand's flag": {[]string{"ingot", "machine", "add", "--ma"}, "--mac"},
		"serve's flag":      {[]string{"ingot", "serve", "--inter"}, "--interface"},
		"one-letter flag":   {[]string{"ingot", "events", "NODE", "-"}, "-n -o --since"},
		"group flags":       {[]string{"ingot", "lab", "up", "--vm"}, "--vms"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _ingot; printf '%s\n' "${COMPREPLY[@]}"`
			out, err := exec.Command(bash, append([]string{"-c", prog, "bash", script}, tc.words...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			got := strings.Fields(string(out))
			for _, w := range strings.Fields(tc.want) {
				if !slices.Contains(got, w) {
					t.Errorf("completing %q offered %q, want %q among them", tc.words, got, w)
				}
			}
			if len(got) > 20 {
				t.Errorf("completing %q offered %d words: not narrowed to what was typed", tc.words, len(got))
			}
		})
	}
}

// The configuration file documents every serve setting, and with every
// commented line taken in it loads to exactly the defaults: values and
// keys cannot drift from pkg/serve.
func TestHelpConfigDocumentsEverySetting(t *testing.T) {
	text := generate(t, nil, "help-config")
	settings, err := serveSettings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	keys := 0
	for _, f := range reflectKeys() {
		keys++
		if !strings.Contains(text, "\n#"+f+": ") {
			t.Errorf("the file lacks %s", f)
		}
	}
	if len(settings) != keys || keys < 40 {
		t.Errorf("%d settings documented, serve.Config has %d keys", len(settings), keys)
	}
	uncommented := regexp.MustCompile(`(?m)^#([a-z_]+: )`).ReplaceAllString(text, "$1")
	path := filepath.Join(t.TempDir(), "ingot.yaml")
	if err := os.WriteFile(path, []byte(uncommented), 0o644); err != nil {
		t.Fatal(err)
	}
	noenv := func(string) string { return "" }
	fromFile, err := serve.Load([]string{"--config", path}, noenv, nil)
	if err != nil {
		t.Fatalf("loading the file with every setting taken in: %v", err)
	}
	defaults, err := serve.Load(nil, noenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(defaults, fromFile, cmpopts.IgnoreFields(serve.Config{}, "Config"), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("the documented defaults are not serve's (-serve +file):\n%s", d)
	}
	// The package's own choices are set, and load.
	pkgText := generate(t, nil, "help-config", "--set", "dhcp=\"off\"", "--set", "tftp=false")
	if err := os.WriteFile(path, []byte(pkgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := serve.Load([]string{"--config", path}, noenv, nil)
	if err != nil || cfg.DHCP != "off" || cfg.TFTP || cfg.Validate() != nil {
		t.Errorf("the package's file: dhcp %q tftp %v, %v, validate %v", cfg.DHCP, cfg.TFTP, err, cfg.Validate())
	}
	var errb bytes.Buffer
	if err := runEnv(context.Background(), &env{stdout: &errb, stderr: &errb, getenv: noenv}, []string{"help-config", "--set", "dhcpp=off"}); err == nil {
		t.Error("--set of an unknown key accepted")
	}
}

// reflectKeys are serve.Config's file keys.
func reflectKeys() []string {
	var out []string
	typ := reflect.TypeOf(serve.Config{})
	for i := 0; i < typ.NumField(); i++ {
		if k := strings.Split(typ.Field(i).Tag.Get("yaml"), ",")[0]; k != "" && k != "-" {
			out = append(out, k)
		}
	}
	return out
}
