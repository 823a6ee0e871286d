package deb

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sampleInputs() Inputs {
	b := []byte("x")
	return Inputs{Version: "1.0", Arch: "amd64", Maintainer: "m <m@example.org>", MTime: time.Unix(1700000000, 0),
		Ingot: b, Agent: b, Man: b, Completion: b, Config: b, Copyright: b, Changelog: b}
}

// Every file has its place and mode; only the configuration is a conffile.
func TestLayout(t *testing.T) {
	p, err := Build(sampleInputs())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range p.Files {
		got[f.Path] = f.Mode.String()
		if f.Conffile != (f.Path == "/etc/ingot/ingot.yaml") {
			t.Errorf("%s: conffile %v", f.Path, f.Conffile)
		}
	}
	want := map[string]string{
		"/usr/bin/ingot": "-rwxr-xr-x", "/usr/lib/ingot/ingot-agent": "-rwxr-xr-x", "/etc/ingot/ingot.yaml": "-rw-r--r--",
		"/etc/ingot/recipes": "drwxr-xr-x", "/lib/systemd/system/ingot.service": "-rw-r--r--",
		"/usr/lib/sysusers.d/ingot.conf": "-rw-r--r--", "/usr/lib/tmpfiles.d/ingot.conf": "-rw-r--r--",
		"/usr/share/bash-completion/completions/ingot": "-rw-r--r--", "/usr/share/man/man1/ingot.1.gz": "-rw-r--r--",
		"/usr/share/doc/ingot/copyright": "-rw-r--r--", "/usr/share/doc/ingot/changelog.gz": "-rw-r--r--",
		"/usr/share/lintian/overrides/ingot": "-rw-r--r--",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("layout (-want +got):\n%s", d)
	}
	if _, err := Build(Inputs{Arch: "riscv64"}); err == nil {
		t.Error("riscv64 accepted")
	}
	in := sampleInputs()
	in.Man = nil
	if _, err := Build(in); err == nil {
		t.Error("a package without its man page accepted")
	}
}

// unitFile reads ingot.service as key -> values (a key may repeat).
func unitFile(t *testing.T) map[string][]string {
	t.Helper()
	b, err := fs.ReadFile(files, "ingot.service")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	section := ""
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = strings.Trim(l, "[]")
		default:
			k, v, _ := strings.Cut(l, "=")
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

// The unit grants exactly the two capabilities and keeps its hardening.
func TestUnit(t *testing.T) {
	u := unitFile(t)
	want := map[string]string{
		"Service.Type": "notify", "Service.User": "ingot", "Service.Group": "ingot",
		"Service.ExecStart":             "/usr/bin/ingot serve --config /etc/ingot/ingot.yaml",
		"Service.ExecReload":            "/bin/kill -HUP $MAINPID",
		"Service.AmbientCapabilities":   "CAP_NET_BIND_SERVICE CAP_NET_RAW",
		"Service.CapabilityBoundingSet": "CAP_NET_BIND_SERVICE CAP_NET_RAW",
		"Service.NoNewPrivileges":       "yes", "Service.ProtectSystem": "strict", "Service.ReadWritePaths": "/var/lib/ingot",
		"Service.PrivateTmp": "yes", "Service.ProtectHome": "yes", "Service.Restart": "on-failure",
		"Service.RestartPreventExitStatus": "78", // main's exitConfig: refusals a restart does not fix
		"Service.RestrictAddressFamilies":  "AF_UNIX AF_INET AF_INET6 AF_NETLINK", "Service.StateDirectory": "ingot",
		"Install.WantedBy": "multi-user.target",
	}
	for k, v := range want {
		if got := u[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
}

// The maintainer scripts parse, and none starts or restarts the server
// or runs ingot itself: a newer ingot migrates the store when the operator
// restarts the server, never while the old one runs.
func TestScripts(t *testing.T) {
	for _, name := range []string{"postinst", "prerm", "postrm"} {
		b, _ := fs.ReadFile(files, name)
		path := filepath.Join(t.TempDir(), name)
		os.WriteFile(path, b, 0o755)
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
		for _, bad := range []string{"start ingot", "restart", "invoke start", "invoke restart", "--now", "bin/ingot", "ingot admin", "ingot serve"} {
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "#") && !strings.Contains(l, "echo") && strings.Contains(l, bad) {
					t.Errorf("%s runs %q: %s", name, bad, l)
				}
			}
		}
	}
}

func TestCopyright(t *testing.T) {
	bsd := "Copyright (c) 2009 The Go Authors. All rights reserved.\n\nRedistribution and use in source and binary forms...\n   * Neither the name of Google Inc.\n"
	apache := "\n                                 Apache License\n                           Version 2.0, January 2004\n    TERMS AND CONDITIONS\n   END OF TERMS AND CONDITIONS\n"
	mods := []module{
		{Path: "the Go standard library and runtime", Version: "go1.26", License: bsd},
		{Path: "github.com/a/b", Version: "v1.0.0", License: apache, Notice: "b\nCopyright 2012 B Inc."},
		{Path: "github.com/c/d", Version: "v2.0.0", License: "MIT License\n\nCopyright (c) 2015 C\n\nPermission is hereby granted, free of charge, ..." + apache},
	}
	c := string(Copyright("", mods))
	for _, want := range []string{
		"Files: *\nCopyright: the ingot authors\nLicense: no-license-yet\n",
		"Files: vendor/the Go standard library and runtime/*\nCopyright: Copyright (c) 2009 The Go Authors. All rights reserved.\n",
		"License: BSD-3-clause\n Copyright (c) 2009 The Go Authors. All rights reserved.\n .\n Redistribution",
		"License: Apache-2.0\n On Debian systems, the complete text of the license can be found in\n \"/usr/share/common-licenses/Apache-2.0\".\n",
		" Its NOTICE file:\n .\n b\n Copyright 2012 B Inc.\n",
		"License: Expat and Apache-2.0\n MIT License\n", "[The Apache License 2.0, as /usr/share/common-licenses/Apache-2.0 has it.]",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("copyright lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "TERMS AND CONDITIONS") {
		t.Errorf("copyright carries the Apache License's text:\n%s", c)
	}
	if _, err := licenseFiles("x", t.TempDir()); err == nil {
		t.Error("a module without a license file accepted")
	}
}

func TestChangelog(t *testing.T) {
	got := string(Changelog("1.0", "abc", "v1.0", "m <m@example.org>", time.Unix(1700000000, 0)))
	want := "ingot (1.0) unstable; urgency=medium\n\n  * Built from git describe v1.0, commit\n    abc.\n" +
		"  * The changes are the repository's history (git log).\n\n -- m <m@example.org>  Tue, 14 Nov 2023 22:13:20 +0000\n"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("changelog (-want +got):\n%s", d)
	}
}
