package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

const recipeUsage = `Usage: ingot recipe COMMAND

Commands:
  lint [--format text|json|github] [--images DIR] [PATHS...]
                      check recipe files and folders (default: recipes/)
  diff [--db PATH] [-o table|json] OLD NEW
                      semantic diff of two files, folders or git revisions
  show [--recipes-dir DIR] NAME
                      print a recipe with its base merged in, as JSON
  pin [--store DIR] [--images DIR] RECIPE
                      fill all-zero or absent sha256 pins from the content store, then lint
  checks [-o table|json]
                      list the acceptance checks recipes may name, their stage, unit and args
  schema              print the JSON Schema of a recipe file
  ls                  through the server: each class's last restore drill, its time to
                      restore against timeouts.restore, and whether it is scale-ready
`

// runRecipe dispatches `ingot recipe SUBCOMMAND`.
func runRecipe(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, recipeUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "lint":
		return runRecipeLint(ctx, e, args[1:])
	case "diff":
		return runRecipeDiff(ctx, e, args[1:])
	case "show":
		return runRecipeShow(ctx, e, args[1:])
	case "schema":
		return runRecipeSchema(ctx, e, args[1:])
	case "pin":
		return runRecipePin(ctx, e, args[1:])
	case "checks":
		return runRecipeChecks(ctx, e, args[1:])
	case "ls":
		return runRecipeLs(ctx, e, args[1:])
	}
	fmt.Fprintf(e.stderr, "ingot recipe: unknown command %q\n\n%s", args[0], recipeUsage)
	return errUsage
}

func runRecipeLint(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("recipe lint", "recipe lint [--format text|json|github] [--images DIR] [PATHS...]")
	format := fs.String("format", "text", "output: text (file:line:col: severity: field: message), json, or github (workflow commands that annotate pull requests)")
	images := fs.String("images", "images", "images folder: os.image.name must be a folder in it holding image.yaml (empty: skip the check)")
	if err := e.parse(fs, args); err != nil || helpAsked(args) {
		return err
	}
	if *format != "text" && *format != "json" && *format != "github" {
		fmt.Fprintf(e.stderr, "ingot recipe lint: --format %q: expected text, json or github\n", *format)
		return errUsage
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{"recipes"}
	}
	diags, nfiles := recipe.Options{ImagesDir: *images}.Lint(paths...)
	if err := writeDiagnostics(e.stdout, *format, diags); err != nil {
		return err
	}
	// racks.yaml beside the recipes is reviewed with them.
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			if _, err := rack.Load(p); err != nil {
				fmt.Fprintln(e.stdout, err)
				return exitError(1)
			}
		}
	}
	errs, warns := countDiagnostics(diags)
	if errs > 0 || warns > 0 {
		fmt.Fprintf(e.stderr, "%d error(s), %d warning(s) in %d recipe file(s)\n", errs, warns, nfiles)
	}
	if nfiles == 0 {
		fmt.Fprintf(e.stderr, "ingot recipe lint: no recipe files (*.yaml, *.yml) in %s\n", strings.Join(paths, " "))
		return exitError(1)
	}
	if errs > 0 {
		return exitError(1)
	}
	return nil
}

func countDiagnostics(diags []recipe.Diagnostic) (errs, warns int) {
	for _, d := range diags {
		if d.Severity == recipe.SeverityError {
			errs++
		} else {
			warns++
		}
	}
	return errs, warns
}

// writeDiagnostics prints diagnostics as text, JSON or GitHub Actions
// workflow commands.
func writeDiagnostics(w io.Writer, format string, diags []recipe.Diagnostic) error {
	switch format {
	case "json":
		if diags == nil {
			diags = []recipe.Diagnostic{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(diags)
	case "github":
		for _, d := range diags {
			msg := d.Message
			if d.Field != "" {
				msg = d.Field + ": " + msg
			}
			fmt.Fprintf(w, "::%s file=%s,line=%d,col=%d,title=ingot recipe lint::%s\n",
				d.Severity, ghProperty(d.File), d.Line, d.Column, ghData(msg))
		}
		return nil
	}
	for _, d := range diags {
		fmt.Fprintln(w, d.String())
	}
	return nil
}

// ghData escapes a workflow command's message (GitHub Actions toolkit
// escapeData); ghProperty escapes a property value (escapeProperty).
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

func runRecipeShow(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("recipe show", "recipe show [--recipes-dir DIR] NAME")
	dir := fs.String("recipes-dir", "recipes", "folder of recipe files")
	if err := e.parse(fs, args); err != nil || helpAsked(args) {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	set, diags := recipe.LoadDir(*dir)
	r, ok := set.Get(fs.Arg(0))
	if !ok {
		return fmt.Errorf("recipe %q: not in %s (have: %s)", fs.Arg(0), *dir, strings.Join(set.Names(), ", "))
	}
	for _, d := range diags {
		if d.File == set.File(fs.Arg(0)) && d.Severity == recipe.SeverityError {
			fmt.Fprintln(e.stderr, d.String())
		}
	}
	return e.printJSON(r)
}

func runRecipeSchema(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("recipe schema", "recipe schema")
	if err := e.parse(fs, args); err != nil || helpAsked(args) {
		return err
	}
	b, err := recipe.SchemaJSON()
	if err != nil {
		return fmt.Errorf("generating the recipe schema: %w", err)
	}
	_, err = e.stdout.Write(b)
	return err
}

// helpAsked reports whether args ask for a subcommand's help, which the
// flag package has already printed.
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}
