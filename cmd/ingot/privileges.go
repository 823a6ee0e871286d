package main

import (
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/privcheck"
	"github.com/ingot-dev/ingot/pkg/serve"
)

// checkPrivileges says, before serve opens anything, which capability or
// permission the process lacks for what cfg asks, and why: an error naming
// every required one, a warning for each optional one. Call it in runServe
// right after the logger is made.
func checkPrivileges(cfg serve.Config, log *slog.Logger) error {
	sys, err := privcheck.Current()
	if err != nil {
		log.Warn("cannot check privileges up front", "err", err)
		return nil
	}
	problems := privcheck.Check(privilegePlan(cfg), sys)
	for _, p := range problems {
		if p.Optional {
			log.Warn("running without a privilege", "lack", p.Message)
		}
	}
	if err := privcheck.Error(sys, problems); err != nil {
		return needsError{err} // exit 78: no restart grants it
	}
	return nil
}

// privilegePlan is what serve will do with cfg that may need privileges.
func privilegePlan(cfg serve.Config) privcheck.Plan {
	p := privcheck.Plan{Interface: cfg.Interface, DHCP: cfg.DHCP, RA: cfg.RA, TFTP: cfg.TFTP, TFTPPort: cfg.TFTPPort,
		HTTPAddr: cfg.HTTPAddr, APIAddr: cfg.APIAddr,
		Write: []privcheck.Path{{Path: cfg.Data, Why: "--data holds artifacts, boot files, the TLS CA and the first admin token"}}}
	// A file that exists must be writable; one that does not, creatable.
	if db, ok := boltPath(cfg.DB); ok {
		p.Write = append(p.Write, privcheck.Path{Path: db, Why: "--db: the database (its lease log lives beside it)"},
			privcheck.Path{Path: filepath.Dir(db), Why: "--db: the lease log and backups are written beside the database"})
	}
	p.Write = append(p.Write, privcheck.Path{Path: cfg.SecretKeyFile, Why: "--secret-key-file: made on first start, replaced by ingot secret rotate-key"})
	for _, r := range []struct{ path, why string }{
		{cfg.Recipes, "--recipes"}, {cfg.TLSCert, "--tls-cert"}, {cfg.TLSKey, "--tls-key"},
		{cfg.BMCCredentialsDir, "--bmc-credentials-dir: BMC credential files"},
	} {
		if r.path != "" {
			p.Read = append(p.Read, privcheck.Path{Path: r.path, Why: r.why})
		}
	}
	if cfg.TFTP {
		p.Read = append(p.Read, privcheck.Path{Path: cfg.IPXEDir, Why: "--ipxe-dir: the iPXE binaries TFTP serves"})
	}
	return p
}

// boltPath is the file of a bbolt store URL or path (false for another
// backend, whose access is a network matter).
func boltPath(db string) (string, bool) {
	if rest, ok := strings.CutPrefix(db, "bolt://"); ok {
		return rest, rest != ""
	}
	return db, db != "" && !strings.Contains(db, "://")
}
