package serve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/boot/httpboot"
	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/store"
)

// FirmwarePackages serves firmware packages from the content store to the
// BMCs of firmware jobs (SimpleUpdate's ImageURI): each at
// /firmware/JOB/TOKEN/SHA256 on the boot listener, where TOKEN is
// HMAC-SHA256(key, JOB/SHA256) under a key kept in DATA/firmware-url.key
// (made on first use). So a URL is unguessable, names one package of one
// job, is the same after a restart of ingot (a BMC resuming its download
// with Range finds it again), and serves only while its job runs. A
// request with a valid token is never rate limited (a BMC reads a large
// image in many Range requests); an invalid one counts against the public
// limit per address, so tokens cannot be probed.
type FirmwarePackages struct {
	arts *artifact.Store
	jobs JobLookup
	key  []byte
	log  *slog.Logger

	mu   sync.Mutex
	base string // where BMCs reach the boot listener (--firmware-url)
}

// NewFirmwarePackages loads (or makes) the URL key in dir.
func NewFirmwarePackages(dir string, arts *artifact.Store, jobs JobLookup, log *slog.Logger) (*FirmwarePackages, error) {
	if arts == nil || jobs == nil {
		return nil, errors.New("firmware packages: the content store and the jobs are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key, err := urlKey(filepath.Join(dir, "firmware-url.key"))
	if err != nil {
		return nil, err
	}
	return &FirmwarePackages{arts: arts, jobs: jobs, key: key, log: log}, nil
}

// urlKey reads the key file, making it (32 random bytes, 0600) when absent.
func urlKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(b) == 32:
		return b, nil
	case err == nil:
		return nil, fmt.Errorf("firmware URL key %s: expected 32 bytes, found %d (remove it to make a new one)", path, len(b))
	case !os.IsNotExist(err):
		return nil, fmt.Errorf("firmware URL key: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("firmware URL key: %w", err)
	}
	if err := durable.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("firmware URL key: %w", err)
	}
	return b, nil
}

// Bind tells the packages where BMCs reach the boot listener (serve:
// --firmware-url, else the public URL).
func (f *FirmwarePackages) Bind(url string) {
	f.mu.Lock()
	f.base = strings.TrimRight(url, "/")
	f.mu.Unlock()
}

func (f *FirmwarePackages) token(job, sha string) string {
	m := hmac.New(sha256.New, f.key)
	m.Write([]byte(job + "/" + sha))
	return hex.EncodeToString(m.Sum(nil)[:24])
}

// URL is where job's BMCs fetch package sha.
func (f *FirmwarePackages) URL(job, sha string) (string, error) {
	f.mu.Lock()
	base := f.base
	f.mu.Unlock()
	if base == "" {
		return "", errors.New("firmware packages: the boot listener is not up yet")
	}
	if !artifact.ValidSHA256(sha) {
		return "", fmt.Errorf("firmware package %q: expected a sha256", sha)
	}
	return base + "/firmware/" + job + "/" + f.token(job, sha) + "/" + sha, nil
}

// Images is the engine's view of job's packages: read from the content
// store, fetched by the BMC at URL.
func (f *FirmwarePackages) Images(job string) firmware.Images {
	return firmware.StoreImages{Store: f.arts, URLFor: func(_ context.Context, sha string) (string, error) { return f.URL(job, sha) }}
}

// Register adds GET (and HEAD) /firmware/JOB/TOKEN/SHA256 to the boot
// listener's mux.
func (f *FirmwarePackages) Register(mux *http.ServeMux, limit *ratelimit.Limiter) {
	mux.Handle("GET /firmware/{job}/{token}/{sha}", httpboot.Limit(limit, "firmware", f.valid, http.HandlerFunc(f.serve)))
}

// valid: the token is the job's for the package. Such requests are not
// counted against the public limit.
func (f *FirmwarePackages) valid(r *http.Request) bool {
	want := f.token(r.PathValue("job"), r.PathValue("sha"))
	return hmac.Equal([]byte(want), []byte(r.PathValue("token")))
}

func (f *FirmwarePackages) serve(w http.ResponseWriter, r *http.Request) {
	job, sha := r.PathValue("job"), r.PathValue("sha")
	if !f.valid(r) || !artifact.ValidSHA256(sha) {
		http.NotFound(w, r)
		return
	}
	if j, err := f.jobs.GetJob(r.Context(), job); err != nil || j.State != store.JobRunning {
		f.log.Info("firmware package of a job that is not running refused", "job", job, "package", sha[:12], "client", r.RemoteAddr)
		http.NotFound(w, r)
		return
	}
	file, err := f.arts.Open(sha)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		http.Error(w, "firmware package unreadable", http.StatusInternalServerError)
		return
	}
	log := f.log.With("job", job, "package", sha[:12], "client", r.RemoteAddr, "range", r.Header.Get("Range"))
	if r.Header.Get("Range") == "" {
		log.Info("firmware package served", "bytes", fi.Size())
	} else {
		log.Debug("firmware package served")
	}
	serveToBMC(w, r, sha+".bin", file, fi)
}

// firmware hands out the machine's pooled session for firmware work.
func (d *bmcDialers) firmware(ctx context.Context, m *machine.Machine) (engine.FirmwareBMC, error) {
	return d.pooled(ctx, m)
}
