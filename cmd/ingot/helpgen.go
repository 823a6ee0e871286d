package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// hiddenCommands generate the Debian package's man page, bash completion
// and default configuration from the CLI's own help, so they cannot drift
// from it. `ingot help` does not list them.
func hiddenCommands() []command {
	return []command{
		{"help-man", "the man page ingot(1), in roff, from every command's -h", runHelpMan},
		{"help-completion", "bash completion for ingot, from every command's -h", runHelpCompletion},
		{"help-config", "a serve configuration file documenting every setting at its default", runHelpConfig},
	}
}

// cmdDoc is one command's help as the CLI prints it.
type cmdDoc struct {
	Name, Summary, Help string
	Flags               []flagDoc
	Subs                []cmdDoc // subcommands with a help of their own
}

// flagDoc is one flag of a FlagSet's PrintDefaults.
type flagDoc struct {
	Name, Type, Usage string
}

// helpOf runs `ingot args... -h` in-process with an empty environment (so
// INGOT_* variables of the build host cannot leak into defaults) and
// returns what it printed on both streams.
func helpOf(ctx context.Context, args ...string) string {
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	_ = runEnv(ctx, e, append(args, "-h"))
	return strings.TrimRight(out.String(), "\n")
}

// collectDocs reads every listed command's help and, for a command made of
// subcommands, each subcommand's help that starts "Usage: ingot CMD SUB".
func collectDocs(ctx context.Context) []cmdDoc {
	var docs []cmdDoc
	for _, c := range commands() {
		if c.name == "version" {
			docs = append(docs, cmdDoc{Name: c.name, Summary: c.summary, Help: "Usage: ingot version"})
			continue
		}
		d := cmdDoc{Name: c.name, Summary: c.summary, Help: helpOf(ctx, c.name)}
		d.Flags = parseFlags(d.Help)
		for _, s := range subcommandNames(d.Help) {
			h := helpOf(ctx, c.name, s)
			if strings.HasPrefix(h, "Usage: ingot "+c.name+" "+s) && h != d.Help {
				d.Subs = append(d.Subs, cmdDoc{Name: s, Help: h, Flags: parseFlags(h)})
			}
		}
		docs = append(docs, d)
	}
	return docs
}

var (
	subLine     = regexp.MustCompile(`(?m)^  ([a-z][a-z0-9-]*)(?:\s|$)`)
	expectedSub = regexp.MustCompile(`\(expected ([a-z, -]+)\)`)
	subWord     = regexp.MustCompile(`[a-z][a-z0-9-]*`)
)

// subcommandNames are the words a group command's help lists at the start
// of its two-space-indented lines, or in its "(expected a, b or c)".
func subcommandNames(help string) []string {
	var names []string
	for _, m := range subLine.FindAllStringSubmatch(help, -1) {
		names = append(names, m[1])
	}
	for _, m := range expectedSub.FindAllStringSubmatch(help, -1) {
		for _, w := range subWord.FindAllString(m[1], -1) {
			if w != "or" {
				names = append(names, w)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// parseFlags reads flag.PrintDefaults' layout: "  -name type" with the usage
// on the following "    \t" lines, or "  -x\tusage" for a one-letter flag.
func parseFlags(help string) []flagDoc {
	var out []flagDoc
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, "    \t") && len(out) > 0:
			f := &out[len(out)-1]
			f.Usage = strings.TrimSpace(f.Usage + " " + strings.TrimPrefix(line, "    \t"))
		case strings.HasPrefix(line, "  -") && len(line) > 3 && line[3] != ' ' && line[3] != '-':
			head, usage, _ := strings.Cut(line[3:], "\t")
			name, typ, _ := strings.Cut(head, " ")
			out = append(out, flagDoc{Name: name, Type: strings.TrimSpace(typ), Usage: strings.TrimSpace(usage)})
		}
	}
	return out
}

// buildDate is SOURCE_DATE_EPOCH's day (reproducible builds), else today.
func buildDate(getenv func(string) string) (time.Time, error) {
	s := getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now().UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: expected seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

func runHelpMan(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("help-man: no arguments expected (SOURCE_DATE_EPOCH sets the date)")
	}
	date, err := buildDate(e.getenv)
	if err != nil {
		return err
	}
	return writeMan(e.stdout, collectDocs(ctx), version, date)
}

func runHelpCompletion(ctx context.Context, e *env, args []string) error {
	if len(args) > 1 || (len(args) == 1 && args[0] != "bash") {
		return fmt.Errorf("help-completion: only bash is generated")
	}
	return writeBashCompletion(e.stdout, collectDocs(ctx))
}

// roff escapes text for a man page line: backslashes, hyphens as minus
// signs (flags must copy as ASCII), and a leading . or ' as text.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// writeMan renders ingot(1): every command's summary and its help verbatim,
// then its subcommands'.
func writeMan(w io.Writer, docs []cmdDoc, ver string, date time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".\\\" Generated by `ingot help-man` from ingot %s's own help; do not edit.\n", ver)
	fmt.Fprintf(&b, ".TH INGOT 1 %q %q \"ingot manual\"\n", date.Format("2006-01-02"), "ingot "+ver)
	b.WriteString(".SH NAME\ningot \\- provision GPU fleets from recipes: PXE/DHCP/TFTP/HTTP boot server, Redfish BMC client and operator CLI\n")
	b.WriteString(".SH SYNOPSIS\n.B ingot\n.I COMMAND\n[\\fIflags\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n" + roff("ingot boots machines into pinned BIOS/OS/driver recipes, records each machine's hardware "+
		"inventory and re-images a failed node from its recipe. `ingot serve` is the server (ingot.service runs it); every other "+
		"command but `ingot admin` is a client of a running server's API.") + "\n")
	b.WriteString(".PP\n" + roff("Every flag is also settable as INGOT_<FLAG> (dashes as underscores); flags beat the environment, "+
		"which beats a configuration file, which beats the defaults.") + "\n")
	b.WriteString(".SH COMMANDS\n")
	for _, d := range docs {
		fmt.Fprintf(&b, ".SS \"%s\"\n%s\n", roff("ingot "+d.Name), roff(d.Summary))
		verbatim(&b, d.Help)
		for _, s := range d.Subs {
			fmt.Fprintf(&b, ".SS \"%s\"\n", roff("ingot "+d.Name+" "+s.Name))
			verbatim(&b, s.Help)
		}
	}
	b.WriteString(manTail)
	_, err := io.WriteString(w, b.String())
	return err
}

// verbatim adds text as a no-fill block.
func verbatim(b *strings.Builder, text string) {
	b.WriteString(".PP\n.nf\n")
	for _, l := range strings.Split(text, "\n") {
		b.WriteString(roff(strings.ReplaceAll(l, "\t", "        ")) + "\n")
	}
	b.WriteString(".fi\n")
}

const manTail = `.SH FILES
.TP
.I /etc/ingot/ingot.yaml
the configuration of \fBingot serve\fR under ingot.service; every setting is documented there
.TP
.I /var/lib/ingot
the server's data: ingot.db, artifacts, boot files, the TLS CA (tls/ca.pem), secrets.key, the first admin.token
.TP
.I /usr/lib/ingot/ingot\-agent
the in\-RAM agent machines boot, for \fBingot initramfs build \-\-agent\fR
.TP
.I ~/.config/ingot/config.yaml
the CLI's named server contexts (\fBingot config\fR)
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1),
.BR systemd.exec (5)
`
