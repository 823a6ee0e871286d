package deb

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// module is one Go module linked into the binaries, with its license text.
type module struct {
	Path, Version string
	License       string // the LICENSE file
	Notice        string // a NOTICE file, which Apache-2.0 asks to pass on
}

// Modules lists the modules linked into the binaries (their build info),
// the Go standard library first, each with its license files from the
// module cache (modCache) or GOROOT.
func Modules(bins []string, modCache, goroot string) ([]module, error) {
	seen := map[string]module{}
	goVersion := ""
	for _, bin := range bins {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("reading the build info of %s: %w", bin, err)
		}
		goVersion = info.GoVersion
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			seen[d.Path+"@"+d.Version] = module{Path: d.Path, Version: d.Version}
		}
	}
	std, err := licenseFiles("Go standard library", goroot)
	if err != nil {
		return nil, err
	}
	std.Path, std.Version = "the Go standard library and runtime", goVersion
	out := []module{std}
	var keys []string
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m := seen[k]
		lic, err := licenseFiles(k, filepath.Join(modCache, escape(m.Path)+"@"+escape(m.Version)))
		if err != nil {
			return nil, err
		}
		m.License, m.Notice = lic.License, lic.Notice
		out = append(out, m)
	}
	return out, nil
}

// escape is the module cache's case encoding: an upper-case letter is "!"
// and the letter in lower case (golang.org/x/mod/module.EscapePath).
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

var licenseName = regexp.MustCompile(`(?i)^(licen[cs]e|copying)(\.(txt|md))?$`)

// licenseFiles reads dir's LICENSE (or COPYING) and NOTICE; a module
// without a license file stops the build: it cannot be shipped unexamined.
func licenseFiles(what, dir string) (module, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return module{}, fmt.Errorf("license of %s: %w", what, err)
	}
	var m module
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		switch {
		case e.IsDir() || err != nil:
		case licenseName.MatchString(e.Name()) && m.License == "":
			m.License = string(b)
		case strings.EqualFold(e.Name(), "NOTICE"):
			m.Notice = string(b)
		}
	}
	if strings.TrimSpace(m.License) == "" {
		return module{}, fmt.Errorf("license of %s: no LICENSE or COPYING file in %s", what, dir)
	}
	return m, nil
}

// referenced are the licenses Debian ships in /usr/share/common-licenses,
// cited instead of copied (lintian wants them cited).
var referenced = []struct{ name, marker string }{
	{"Apache-2.0", "Apache License\n"}, {"MPL-2.0", "Mozilla Public License Version 2.0"},
}

// shortName names a license text as DEP-5 does; full is whether the text
// must be copied (false: cite common-licenses).
func shortName(text string) (name string, full bool) {
	mixed := strings.Contains(text, "Permission is hereby granted") || strings.Contains(text, "Redistribution and use")
	for _, r := range referenced {
		if strings.Contains(text, r.marker) && !mixed {
			return r.name, false
		}
	}
	switch {
	case strings.Contains(text, "Permission is hereby granted, free of charge") && strings.Contains(text, "Apache License"):
		return "Expat and Apache-2.0", true
	case strings.Contains(text, "Permission is hereby granted, free of charge"):
		return "Expat", true
	case strings.Contains(text, "Neither the name"):
		return "BSD-3-clause", true
	case strings.Contains(text, "Redistribution and use"):
		return "BSD-2-clause", true
	}
	return "other", true
}

var copyrightLine = regexp.MustCompile(`(?im)^\s*(copyright\s+(\(c\)|©)?\s*[0-9].*)$`)

// Copyright renders debian/copyright (DEP-5): ingot itself, then every
// module linked in, with its license text or a common-licenses citation
// and its NOTICE.
func Copyright(ingotLicense string, mods []module) []byte {
	var b strings.Builder
	b.WriteString("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n" +
		"Upstream-Name: ingot\nSource: https://github.com/ingot-dev/ingot\n" +
		"Comment: ingot and ingot-agent are static Go programs; the paragraphs after the\n" +
		" first are the Go modules linked into them, listed from their build info.\n\n")
	b.WriteString("Files: *\nCopyright: the ingot authors\n")
	if strings.TrimSpace(ingotLicense) == "" {
		b.WriteString("License: no-license-yet\n The ingot repository carries no LICENSE file yet; until its authors choose\n" +
			" one, no license is granted beyond what the law allows.\n")
	} else {
		writeLicense(&b, ingotLicense)
	}
	for _, m := range mods {
		fmt.Fprintf(&b, "\nFiles: vendor/%s/*\n", m.Path)
		holders := copyrightLine.FindAllStringSubmatch(m.License, -1)
		if len(holders) == 0 {
			fmt.Fprintf(&b, "Copyright: the authors of %s\n", m.Path)
		} else {
			b.WriteString("Copyright:")
			for i, h := range holders {
				sep := "\n "
				if i == 0 {
					sep = " "
				}
				b.WriteString(sep + strings.TrimSpace(h[1]))
			}
			b.WriteString("\n")
		}
		comment := fmt.Sprintf("Go module %s %s, linked into the binaries.", m.Path, m.Version)
		if m.Notice != "" {
			comment += "\n\nIts NOTICE file:\n\n" + m.Notice
		}
		b.WriteString("Comment:" + indent(comment))
		writeLicense(&b, m.License)
	}
	return []byte(b.String())
}

func writeLicense(b *strings.Builder, text string) {
	name, full := shortName(text)
	text = citeApache(text)
	if !full {
		fmt.Fprintf(b, "License: %s\n On Debian systems, the complete text of the license can be found in\n \"/usr/share/common-licenses/%s\".\n", name, name)
		return
	}
	b.WriteString("License: " + name + indent(text))
}

var apacheText = regexp.MustCompile(`(?s)\n[ \t]*Apache License\s*\n\s*Version 2\.0, January 2004.*?END OF TERMS AND CONDITIONS[ \t]*\n`)

// citeApache replaces a full Apache License 2.0 inside a text of several
// licenses with a citation of Debian's copy.
func citeApache(text string) string {
	return apacheText.ReplaceAllString(text, "\n[The Apache License 2.0, as /usr/share/common-licenses/Apache-2.0 has it.]\n")
}

// indent renders text as a DEP-5 continuation: each line after a space,
// an empty line as " .".
func indent(text string) string {
	var b strings.Builder
	b.WriteString("\n")
	for _, l := range strings.Split(strings.TrimRight(text, "\n "), "\n") {
		if l = strings.TrimRight(l, " \t\r"); l == "" {
			l = "."
		}
		b.WriteString(" " + l + "\n")
	}
	return b.String()
}
