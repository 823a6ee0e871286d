package vbmc_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"

	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// A virtual BMC in a test: serve a mockup, power a system off with a
// Redfish reset, read the new state back.
func Example() {
	// The mockups lie in testdata/redfish-mockups at the module root (../.. from here).
	root := filepath.Join("..", "..", "testdata", "redfish-mockups", "dmtf-public-tower")
	b, err := vbmc.New(vbmc.Config{Root: root, Username: "admin", Password: "pw"})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(b)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/redfish/v1/Systems/437XR1238R2/Actions/ComputerSystem.Reset",
		bytes.NewReader([]byte(`{"ResetType": "ForceOff"}`)))
	req.SetBasicAuth("admin", "pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Printf("PowerState %s, %d sessions open\n", b.Power(), b.OpenSessions())
	// Output: PowerState Off, 0 sessions open
}

// Many BMCs for a scale test, each on its own 127.0.0.1 port with its own state.
func ExampleStartMany() {
	root := filepath.Join("..", "..", "testdata", "redfish-mockups", "supermicro-hgx-b200-partial")
	urls, stop, err := vbmc.StartMany(context.Background(), 3, vbmc.Config{Root: root})
	if err != nil {
		panic(err)
	}
	defer stop()
	fmt.Println(len(urls), "BMCs")
	// Output: 3 BMCs
}
