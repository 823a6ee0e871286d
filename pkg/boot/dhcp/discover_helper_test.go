//go:build integration || e2e

package dhcp_test

import (
	"fmt"

	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// discoverer is the fleet service over st, as serve wires it: unknown
// clients become discovered machines with an event.
func discoverer(st store.Store) *fleet.Service {
	f, err := fleet.New(fleet.Config{Store: st, Recipes: func(name string) (*recipe.Recipe, error) {
		return nil, fmt.Errorf("recipe %s: none in this test", name)
	}})
	if err != nil {
		panic(err) // only for a nil store
	}
	return f
}
