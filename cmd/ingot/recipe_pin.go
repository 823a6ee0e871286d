package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// runRecipePin implements `ingot recipe pin RECIPE`: it fills the file's
// all-zero or absent sha256 pins from the content store, editing only
// those values, then lints the result.
func runRecipePin(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("recipe pin", "recipe pin [--store DIR] [--images DIR] RECIPE\n\n"+
		"Fills RECIPE's all-zero or absent os.image, os.agent.kernel and os.agent.initrd sha256 pins with the\n"+
		"digests the content store holds under their names (os.image.name + .FORMAT, the agent's path),\n"+
		"keeping every comment and the layout, then lints the file.")
	store := fs.String("store", defaultDataDir, "content store folder (as ingot image import --data)")
	images := fs.String("images", "images", "images folder for the lint that follows (empty: skip the image check)")
	if err := e.parse(fs, flagsFirst(fs, args)); err != nil || helpAsked(args) {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	file := fs.Arg(0)
	data, err := recipe.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading recipe: %w", err)
	}
	r, base := resolvedForPin(file, data)
	st, err := openStoreReadOnly(*store)
	if err != nil {
		return err
	}
	from := map[string]string{}
	out, changes, err := recipe.FillPins(file, data, func(field string) (string, error) {
		sum, name, err := storeDigest(st, r, field)
		from[field] = name
		return sum, err
	})
	if err != nil {
		return fmt.Errorf("pinning %s: nothing written:\n%w", file, err)
	}
	if len(changes) > 0 {
		if err := writeFileAtomic(file, out); err != nil {
			return err
		}
	}
	reportPins(e, file, *store, r, base, changes, from)
	diags, _ := recipe.Options{ImagesDir: *images}.Lint(file)
	if err := writeDiagnostics(e.stdout, "text", diags); err != nil {
		return err
	}
	if recipe.HasErrors(diags) {
		return exitError(1)
	}
	return nil
}

func reportPins(e *env, file, store string, r *recipe.Recipe, base string, changes []recipe.PinChange, from map[string]string) {
	changed := map[string]bool{}
	for _, c := range changes {
		changed[c.Field] = true
		verb := "pinned"
		if c.Old == "" {
			verb = "added"
		}
		fmt.Fprintf(e.stdout, "%s:%d: %s %s = %s (%s in %s)\n", file, c.Line, verb, c.Field, c.New, from[c.Field], store)
	}
	for _, f := range recipe.PinFields() {
		if v := pinValue(r, f); !changed[f] && recipe.IsPlaceholderSHA256(v) && base != "" {
			fmt.Fprintf(e.stdout, "%s: %s is the placeholder it inherits: pin %s\n", file, f, base)
		}
	}
	if len(changes) == 0 {
		fmt.Fprintf(e.stdout, "%s: no placeholder or missing pin in this file\n", file)
	}
	if r.IsTemplate() {
		fmt.Fprintf(e.stdout, "%s: still template: true; remove it once every pin is set to assign machines to %s\n", file, r.Name)
	}
}

// resolvedForPin loads the recipe with the bases its extends chain names
// (read from beside it) and returns it with its base's file ("" without
// extends). A recipe that does not load is returned as data alone says.
func resolvedForPin(file string, data []byte) (*recipe.Recipe, string) {
	set, _ := recipe.Options{}.LoadFile(file)
	own, _ := recipe.Parse(file, data)
	if own == nil {
		own = &recipe.Recipe{}
	}
	r, ok := set.Get(own.Name)
	if !ok || set.File(own.Name) != file {
		r = own
	}
	return r, set.File(r.Extends)
}

// storeDigest is the digest the store holds for a pin's artifact, and the
// store name it was found under.
func storeDigest(st *artifact.Store, r *recipe.Recipe, field string) (string, string, error) {
	names, err := pinNames(r, field)
	if err != nil {
		return "", "", err
	}
	for _, n := range names {
		sum, err := st.Resolve(n)
		if err == nil {
			return sum, n, nil
		}
		if !errors.Is(err, artifact.ErrNotFound) && !errors.Is(err, artifact.ErrBadName) {
			return "", n, err
		}
	}
	return "", "", fmt.Errorf("%s not in the content store %s (ingot image import, ingot lab up, or --store DIR)",
		strings.Join(names, " or "), st.Dir())
}

// pinNames lists the store names a pin's artifact may have.
func pinNames(r *recipe.Recipe, field string) ([]string, error) {
	var a recipe.Artifact
	switch field {
	case "os.image.sha256":
		img := r.OS.Image
		switch {
		case img.URL != "":
			return nil, fmt.Errorf("os.image.url is set: the image is served from %s, not the content store; pin its digest by hand", img.URL)
		case img.Name == "":
			return nil, errors.New("os.image has no name to look up")
		}
		format := img.Format
		if format == "" {
			format = "raw.zst"
		}
		return []string{img.Name + "." + format, img.Name}, nil
	case "os.agent.kernel.sha256":
		a = r.OS.Agent.Kernel
	case "os.agent.initrd.sha256":
		a = r.OS.Agent.Initrd
	}
	what := strings.TrimSuffix(field, ".sha256")
	switch {
	case a.Path == "":
		return nil, fmt.Errorf("%s has no path to look up", what)
	case strings.Contains(a.Path, "://"):
		return nil, fmt.Errorf("%s.path is the URL %s, not a content store name; pin its digest by hand", what, a.Path)
	}
	return []string{a.Path}, nil
}

func pinValue(r *recipe.Recipe, field string) string {
	switch field {
	case "os.image.sha256":
		return r.OS.Image.SHA256
	case "os.agent.kernel.sha256":
		return r.OS.Agent.Kernel.SHA256
	case "os.agent.initrd.sha256":
		return r.OS.Agent.Initrd.SHA256
	}
	return ""
}

// openStoreReadOnly opens an existing content store; it creates nothing.
func openStoreReadOnly(dir string) (*artifact.Store, error) {
	if st, err := os.Stat(filepath.Join(dir, "names")); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("content store %s: expected a folder with names/ and sha256/ (ingot image import --data %s): %v", dir, dir, err)
	}
	return artifact.Open(dir)
}

// writeFileAtomic replaces file with data, keeping its mode.
func writeFileAtomic(file string, data []byte) error {
	mode := os.FileMode(0o644)
	if st, err := os.Stat(file); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".pin-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}
