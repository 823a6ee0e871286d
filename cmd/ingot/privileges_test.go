package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/privcheck"
	"github.com/ingot-dev/ingot/pkg/serve"
)

// The plan names what the packaged configuration makes serve do.
func TestPrivilegePlan(t *testing.T) {
	cfg, err := serve.Load([]string{"--interface", "eth1", "--pool", "10.0.0.0/24,10.0.0.10-10.0.0.99", "--recipes", "/etc/ingot/recipes",
		"--db", "bolt:///srv/ingot/fleet.db", "--tls-cert", "/etc/ingot/tls.pem", "--tls-key", "/etc/ingot/tls.key"}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := privcheck.Plan{Interface: "eth1", DHCP: "full", RA: true, TFTP: true, TFTPPort: 69, HTTPAddr: ":8080", APIAddr: ":8443",
		Write: []privcheck.Path{
			{Path: "/var/lib/ingot", Why: "--data holds artifacts, boot files, the TLS CA and the first admin token"},
			{Path: "/srv/ingot/fleet.db", Why: "--db: the database (its lease log lives beside it)"},
			{Path: "/srv/ingot", Why: "--db: the lease log and backups are written beside the database"},
			{Path: "/var/lib/ingot/secrets.key", Why: "--secret-key-file: made on first start, replaced by ingot secret rotate-key"},
		},
		Read: []privcheck.Path{
			{Path: "/etc/ingot/recipes", Why: "--recipes"}, {Path: "/etc/ingot/tls.pem", Why: "--tls-cert"}, {Path: "/etc/ingot/tls.key", Why: "--tls-key"},
			{Path: "/etc/ingot/bmc", Why: "--bmc-credentials-dir: BMC credential files"},
			{Path: "/usr/lib/ipxe", Why: "--ipxe-dir: the iPXE binaries TFTP serves"},
		}}
	if d := cmp.Diff(want, privilegePlan(cfg)); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
	for db, want := range map[string]string{"/a/b.db": "/a/b.db", "bolt:///a/b.db": "/a/b.db", "etcd://h:2379": "", "": ""} {
		if got, ok := boltPath(db); got != want && ok {
			t.Errorf("boltPath(%q) = %q, want %q", db, got, want)
		}
	}
}
