package image

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/artifact"
)

// Stored is one image in the content store.
type Stored struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// IsImageName reports whether a store name is a disk image's.
func IsImageName(n string) bool {
	return strings.HasSuffix(n, ".raw") || strings.HasSuffix(n, ".raw.zst") || strings.HasSuffix(n, ".img") || strings.HasSuffix(n, ".img.zst")
}

// Import adds the image file to the content store in dataDir under name
// (default: the file's base name) and returns it.
func Import(ctx context.Context, dataDir, file, name string) (*Stored, error) {
	if name == "" {
		name = filepath.Base(file)
	}
	if !IsImageName(name) {
		return nil, fmt.Errorf("importing image %s: name %q: expected a .raw or .raw.zst file (or --name ending so)", file, name)
	}
	st, err := artifact.Open(dataDir)
	if err != nil {
		return nil, err
	}
	ref, err := st.PutFile(ctx, file)
	if err != nil {
		return nil, fmt.Errorf("importing image %s: %w", file, err)
	}
	if err := st.SetName(name, ref.SHA256); err != nil {
		return nil, fmt.Errorf("importing image %s: %w", file, err)
	}
	return &Stored{Name: name, SHA256: ref.SHA256, Size: ref.Size}, nil
}

// List returns the named images in the store, sorted by name.
func List(st *artifact.Store) ([]Stored, error) {
	names, err := st.Names()
	if err != nil {
		return nil, err
	}
	var out []Stored
	for _, n := range names {
		if !IsImageName(n.Name) {
			continue
		}
		ref, err := st.Stat(n.SHA256)
		if err != nil {
			return nil, fmt.Errorf("listing images: %s: %w", n.Name, err)
		}
		out = append(out, Stored{Name: n.Name, SHA256: n.SHA256, Size: ref.Size})
	}
	return out, nil
}
