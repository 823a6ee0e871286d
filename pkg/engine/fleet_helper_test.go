package engine

import (
	"testing"

	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// fleetOn is the fleet over s, the engine's Machines in tests.
func fleetOn(t *testing.T, s store.Store, recipes func(string) (*recipe.Recipe, error)) *fleet.Service {
	t.Helper()
	f, err := fleet.New(fleet.Config{Store: s, Recipes: fleet.RecipeSource(recipes)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func noRecipes(string) (*recipe.Recipe, error) { return nil, nil }
