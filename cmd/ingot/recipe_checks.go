package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// runRecipeChecks implements `ingot recipe checks`: the check registry.
func runRecipeChecks(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("recipe checks", "recipe checks [-o table|json]")
	format := fs.String("o", "table", "output: table or json")
	if err := e.parse(fs, args); err != nil || helpAsked(args) {
		return err
	}
	if *format == "json" {
		return e.printJSON(recipe.Checks())
	}
	if *format != "table" {
		fmt.Fprintf(e.stderr, "ingot recipe checks: -o %q: expected table or json\n", *format)
		return errUsage
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTAGE\tUNIT\tARGS\tCHECKS")
	for _, c := range recipe.Checks() {
		argList := strings.Join(c.Args, ",")
		if argList == "" {
			argList = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Stage, c.Unit, argList, c.Doc)
	}
	return tw.Flush()
}
