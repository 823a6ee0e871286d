package web

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// vendorManifest is assets/vendor/VENDOR.json.
type vendorManifest struct {
	Packages []struct {
		Name, Version, License, Integrity string
		Files                             []struct {
			Path, From, SHA256 string
			License            bool
		}
	}
}

// Every vendored file is listed with its package's pinned version and
// the registry's integrity, its bytes match the listed sha256, each
// package brings its license, and nothing unlisted sits under vendor/.
func TestVendoredAssets(t *testing.T) {
	b, err := fs.ReadFile(assetFS, "assets/vendor/VENDOR.json")
	if err != nil {
		t.Fatal(err)
	}
	var m vendorManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("VENDOR.json: %v", err)
	}
	listed := map[string]bool{"VENDOR.json": true}
	exact := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	for _, p := range m.Packages {
		if !exact.MatchString(p.Version) || !strings.HasPrefix(p.Integrity, "sha512-") || p.License == "" {
			t.Errorf("%s: version %q (want an exact version), integrity %q, license %q", p.Name, p.Version, p.Integrity, p.License)
		}
		license := false
		for _, f := range p.Files {
			listed[f.Path] = true
			data, err := fs.ReadFile(assetFS, "assets/vendor/"+f.Path)
			if err != nil {
				t.Errorf("%s: %v", f.Path, err)
				continue
			}
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != f.SHA256 {
				t.Errorf("%s: sha256 %s, VENDOR.json says %s: the file changed without its manifest", f.Path, got, f.SHA256)
			}
			license = license || f.License && len(data) > 0
		}
		if !license {
			t.Errorf("%s %s is vendored without its license file", p.Name, p.Version)
		}
	}
	err = fs.WalkDir(assetFS, "assets/vendor", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !listed[strings.TrimPrefix(path, "assets/vendor/")] {
			t.Errorf("%s is not listed in VENDOR.json", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The page links the version the manifest names.
	js, _ := fs.ReadFile(assetFS, "assets/vendor/htmx/htmx.min.js")
	if !strings.Contains(string(js), `version:"`+m.Packages[0].Version+`"`) {
		t.Errorf("htmx.min.js does not say it is version %s", m.Packages[0].Version)
	}
}
