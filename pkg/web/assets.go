package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// The dashboard's static files, embedded: style.css, app.js, and the
// vendored JavaScript library under vendor/ (see vendor/VENDOR.json and
// TestVendoredAssets). go build needs no network and no Node.js.
//
//go:embed assets
var assetFS embed.FS

// served are the files pages link to, by their plain name.
var served = []string{"style.css", "app.js", "vendor/htmx/htmx.min.js"}

// asset is one served file: its bytes, gzip-compressed bytes, and the
// name with its content hash, so it can be cached for good.
type asset struct {
	body, gz []byte
	ctype    string
	hashed   string
}

type assets struct {
	byHashed map[string]*asset
	byName   map[string]*asset
}

func loadAssets() (*assets, error) {
	as := &assets{byHashed: map[string]*asset{}, byName: map[string]*asset{}}
	for _, name := range served {
		b, err := fs.ReadFile(assetFS, "assets/"+name)
		if err != nil {
			return nil, fmt.Errorf("web: asset %s: %w", name, err)
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(name)
		base := strings.TrimSuffix(path.Base(name), ext)
		a := &asset{body: b, ctype: mime.TypeByExtension(ext), hashed: base + "." + hex.EncodeToString(sum[:6]) + ext}
		var zb bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		a.gz = zb.Bytes()
		as.byHashed[a.hashed], as.byName[name] = a, a
	}
	return as, nil
}

// url is the path a page links an asset by.
func (as *assets) url(name string) (string, error) {
	a := as.byName[name]
	if a == nil {
		return "", fmt.Errorf("no asset %q", name)
	}
	return Prefix + "assets/" + a.hashed, nil
}

// ServeHTTP serves an asset by its hashed name, cached for a year: a new
// build changes the name.
func (as *assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := as.byHashed[r.PathValue("file")]
	if a == nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Vary", "Accept-Encoding")
	body := a.body
	if acceptsGzip(r) {
		body = a.gz
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
