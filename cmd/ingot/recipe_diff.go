package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// recipeChanges groups the changes of one recipe with the machines using it.
type recipeChanges struct {
	Recipe   string          `json:"recipe"`
	Changes  []recipe.Change `json:"changes"`
	Machines []string        `json:"machines,omitempty"` // nil without --affected
}

func runRecipeDiff(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("recipe diff", "recipe diff [--affected [--server URL]] [-o table|json|yaml] OLD NEW\n\n"+
		"OLD and NEW are two recipe files, two folders, or two git revisions (an argument that is not an\n"+
		"existing path), e.g. `ingot recipe diff HEAD~1 HEAD` compares recipes/ at both revisions.\n"+
		"The files are read here; only --affected asks the server which machines use each changed recipe.")
	af := addAPIFlags(fs)
	affected := fs.Bool("affected", false, "ask the server which enrolled machines use each changed recipe")
	dir := fs.String("recipes-dir", "recipes", "recipe folder inside the repository, for git revisions")
	if err := e.parse(fs, args); err != nil || helpAsked(args) {
		return err
	}
	if fs.NArg() != 2 || checkOutput(af.output) != nil {
		fs.Usage()
		return errUsage
	}
	changes, err := diffArgs(ctx, e, fs.Arg(0), fs.Arg(1), *dir)
	if err != nil {
		return err
	}
	groups := groupChanges(changes)
	if *affected {
		c, err := af.client(e)
		if err != nil {
			return fmt.Errorf("recipe diff --affected: %w", err)
		}
		if err := affectedMachines(ctx, c, groups); err != nil {
			return fmt.Errorf("recipe diff --affected: %w", err)
		}
	}
	if groups == nil {
		groups = []recipeChanges{}
	}
	return e.render(af.output, groups, func() error {
		writeRecipeChanges(e.stdout, groups, *affected)
		return nil
	})
}

// diffArgs diffs two files, or two sets (folders or git revisions).
func diffArgs(ctx context.Context, e *env, oldArg, newArg, dir string) ([]recipe.Change, error) {
	oldFile, newFile := isFile(oldArg), isFile(newArg)
	if oldFile != newFile {
		return nil, fmt.Errorf("recipe diff %s %s: expected two files, or two folders or git revisions", oldArg, newArg)
	}
	if oldFile {
		a, err := loadOneRecipe(e, oldArg)
		if err != nil {
			return nil, err
		}
		b, err := loadOneRecipe(e, newArg)
		if err != nil {
			return nil, err
		}
		return recipe.Diff(a, b), nil
	}
	a, err := loadRecipeSet(ctx, e, oldArg, dir)
	if err != nil {
		return nil, err
	}
	b, err := loadRecipeSet(ctx, e, newArg, dir)
	if err != nil {
		return nil, err
	}
	return recipe.DiffSets(a, b), nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// loadOneRecipe reads one recipe file and the bases its extends chain
// names, from beside it.
func loadOneRecipe(e *env, file string) (*recipe.Recipe, error) {
	set, diags := recipe.Options{}.LoadFile(file)
	warnLoad(e, file, diags)
	for _, n := range set.Names() {
		if set.File(n) == file {
			r, _ := set.Get(n)
			return r, nil
		}
	}
	for _, d := range diags {
		if d.Severity == recipe.SeverityError {
			return nil, fmt.Errorf("reading recipe %s: no recipe loaded from it: %s", file, d)
		}
	}
	return nil, fmt.Errorf("reading recipe %s: no recipe with a name in it", file)
}

// loadRecipeSet reads a folder, or the recipes folder at a git revision.
func loadRecipeSet(ctx context.Context, e *env, arg, dir string) (*recipe.Set, error) {
	var (
		files []recipe.File
		diags []recipe.Diagnostic
		err   error
	)
	if _, statErr := os.Stat(arg); statErr == nil {
		files, diags = recipe.ReadPaths(arg)
	} else if files, diags, err = gitRecipeFiles(ctx, arg, dir); err != nil {
		return nil, err
	}
	set, more := recipe.Options{}.Build(files)
	warnLoad(e, arg, append(diags, more...))
	return set, nil
}

// warnLoad mentions lint errors on the side being diffed; the diff goes on
// with what parsed.
func warnLoad(e *env, what string, diags []recipe.Diagnostic) {
	if errs, _ := countDiagnostics(diags); errs > 0 {
		fmt.Fprintf(e.stderr, "warning: %s has %d lint error(s) (run ingot recipe lint); diffing what parsed\n", what, errs)
	}
}

// gitRecipeFiles reads the recipe files of dir at a git revision. A file
// over recipe.MaxFileSize, by the size git lists, is a diagnostic, unread.
func gitRecipeFiles(ctx context.Context, rev, dir string) ([]recipe.File, []recipe.Diagnostic, error) {
	if _, err := git(ctx, "rev-parse", "--verify", "--quiet", rev+"^{commit}"); err != nil {
		return nil, nil, fmt.Errorf("%q is neither an existing path nor a git revision", rev)
	}
	top, err := git(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, nil, err
	}
	root := strings.TrimSpace(string(top))
	list, err := git(ctx, "-C", root, "ls-tree", "-l", "-z", rev, "--", path.Clean(dir)+"/")
	if err != nil {
		return nil, nil, err
	}
	var (
		files []recipe.File
		diags []recipe.Diagnostic
	)
	for _, entry := range strings.Split(string(list), "\x00") {
		// <mode> SP <type> SP <object> SP <size> TAB <name>
		meta, name, _ := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !recipe.IsRecipeFile(name) || len(fields) != 4 || fields[1] != "blob" {
			continue
		}
		file := rev + ":" + name
		size, err := strconv.ParseInt(fields[3], 10, 64)
		if err == nil {
			err = recipe.CheckSize(file, size)
		}
		if err != nil {
			diags = append(diags, recipe.Diagnostic{File: file, Line: 1, Column: 1, Severity: recipe.SeverityError,
				Message: fmt.Sprintf("reading recipe: %v", err)})
			continue
		}
		data, err := git(ctx, "-C", root, "show", rev+":"+name)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, recipe.File{Name: file, Data: data})
	}
	return files, diags, nil
}

func git(ctx context.Context, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func groupChanges(changes []recipe.Change) []recipeChanges {
	var groups []recipeChanges
	for _, c := range changes {
		if len(groups) == 0 || groups[len(groups)-1].Recipe != c.Recipe {
			groups = append(groups, recipeChanges{Recipe: c.Recipe})
		}
		g := &groups[len(groups)-1]
		g.Changes = append(g.Changes, c)
	}
	return groups
}

// affectedMachines fills in, from the server, the machines enrolled with
// each changed recipe.
func affectedMachines(ctx context.Context, c *client.Client, groups []recipeChanges) error {
	for i := range groups {
		ms, _, err := listMachines(ctx, c, client.ListOptions{Recipe: groups[i].Recipe})
		if err != nil {
			return fmt.Errorf("machines of recipe %s: %w", groups[i].Recipe, err)
		}
		groups[i].Machines = []string{}
		for _, m := range ms {
			groups[i].Machines = append(groups[i].Machines, m.Name)
		}
	}
	return nil
}

func writeRecipeChanges(w io.Writer, groups []recipeChanges, withMachines bool) {
	if len(groups) == 0 {
		fmt.Fprintln(w, "no recipe changes")
		return
	}
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s:\n", g.Recipe)
		for _, c := range g.Changes {
			fmt.Fprintf(w, "  %s\n", c.Text)
		}
		if withMachines {
			names := "none"
			if len(g.Machines) > 0 {
				names = strings.Join(g.Machines, ", ")
			}
			fmt.Fprintf(w, "  machines using it (%d): %s\n", len(g.Machines), names)
		}
	}
}
