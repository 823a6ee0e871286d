package bolt_test

import (
	"testing"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// TestConformance runs the backend conformance suite on bbolt; the store of
// each case is checked for consistency when the case ends.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store { return storetest.OpenWith(t, opts) })
}
