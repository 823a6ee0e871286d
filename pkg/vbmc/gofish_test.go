package vbmc

import (
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// gofishConnect logs in with a session, as ingot's BMC client does.
func gofishConnect(t *testing.T, url, user, pass string) *gofish.APIClient {
	t.Helper()
	c, err := gofish.ConnectContext(t.Context(), gofish.ClientConfig{Endpoint: url, Username: user, Password: pass})
	if err != nil {
		t.Fatalf("gofish connect: %v", err)
	}
	return c
}

func gofishSystem(t *testing.T, c *gofish.APIClient, id string) *schemas.ComputerSystem {
	t.Helper()
	s, err := schemas.GetComputerSystem(c, id)
	if err != nil {
		t.Fatalf("gofish GET %s: %v", id, err)
	}
	return s
}

// gofish (the library ingot's BMC client is built on) drives every mockup:
// session login and logout, reset, boot override, BIOS settings.
func TestGofishCompat(t *testing.T) {
	for m, tc := range resetMockups {
		t.Run(m, func(t *testing.T) {
			b, hc := start(t, m, nil)
			c := gofishConnect(t, hc.base, testUser, testPass)
			if n := b.OpenSessions(); n != 1 {
				t.Errorf("sessions after gofish connect = %d, want 1", n)
			}
			systems, err := c.Service.Systems()
			if err != nil || len(systems) == 0 {
				t.Fatalf("gofish Systems: %v (%d)", err, len(systems))
			}
			sys := gofishSystem(t, c, tc.system)
			if _, err := sys.Reset(schemas.ForceOffResetType); err != nil {
				t.Fatalf("gofish Reset ForceOff: %v", err)
			}
			if p := gofishSystem(t, c, tc.system).PowerState; p != schemas.OffPowerState {
				t.Errorf("after ForceOff: %q", p)
			}
			if bt, ok := bootMockups[m]; ok {
				sys = gofishSystem(t, c, tc.system)
				boot := sys.Boot // the whole object, annotations included
				boot.BootSourceOverrideTarget = schemas.BootSource(bt.allowed)
				boot.BootSourceOverrideEnabled = schemas.OnceBootSourceOverrideEnabled
				if err := sys.SetBoot(&boot); err != nil {
					t.Fatalf("gofish SetBoot %s: %v", bt.allowed, err)
				}
				boot.BootSourceOverrideTarget = schemas.BootSource(bt.refused)
				if err := gofishSystem(t, c, tc.system).SetBoot(&boot); err == nil {
					t.Errorf("gofish SetBoot %s: accepted, want refused", bt.refused)
				}
			}
			if bc, ok := biosMockups[m]; ok && bc.system == tc.system {
				bios, err := gofishSystem(t, c, tc.system).Bios()
				if err != nil {
					t.Fatalf("gofish Bios: %v", err)
				}
				if err := bios.UpdateBiosAttributes(schemas.SettingsAttributes{bc.attr: bc.value}); err != nil {
					t.Fatalf("gofish UpdateBiosAttributes: %v", err)
				}
			}
			if _, err := gofishSystem(t, c, tc.system).Reset(schemas.OnResetType); err != nil {
				t.Fatalf("gofish Reset On: %v", err)
			}
			after := gofishSystem(t, c, tc.system)
			if after.PowerState != schemas.OnPowerState {
				t.Errorf("after On: %q", after.PowerState)
			}
			if _, ok := bootMockups[m]; ok && after.Boot.BootSourceOverrideEnabled != schemas.DisabledBootSourceOverrideEnabled {
				t.Errorf("one-time override not consumed: %q", after.Boot.BootSourceOverrideEnabled)
			}
			if bc, ok := biosMockups[m]; ok && bc.system == tc.system {
				bios, err := after.Bios()
				if err != nil {
					t.Fatal(err)
				}
				if v := attrValue(map[string]any{"Attributes": map[string]any(bios.Attributes)}, bc.attr); v != bc.value {
					t.Errorf("BIOS %s after reset = %v, want %v", bc.attr, v, bc.value)
				}
			}
			c.Logout()
			if n := b.OpenSessions(); n != 0 {
				t.Errorf("sessions after gofish Logout = %d, want 0", n)
			}
		})
	}
}

// gofish inserts and ejects virtual media: by action on Gigabyte/AMI, by
// its PATCH fallback on the DMTF tower; and rotates a password.
func TestGofishMediaAndPassword(t *testing.T) {
	for m, vmID := range map[string]string{
		"gigabyte-ami-h262-z63": "/redfish/v1/Managers/Self/VirtualMedia/CD1",
		"dmtf-public-tower":     "/redfish/v1/Managers/BMC/VirtualMedia/CD1",
	} {
		t.Run(m, func(t *testing.T) {
			b, hc := start(t, m, nil)
			c := gofishConnect(t, hc.base, testUser, testPass)
			defer c.Logout()
			vm, err := schemas.GetObject[schemas.VirtualMedia](c, vmID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := vm.EjectMedia(); err != nil {
				t.Fatalf("eject: %v", err)
			}
			vm, _ = schemas.GetObject[schemas.VirtualMedia](c, vmID)
			if gofish.Deref(vm.Inserted) {
				t.Errorf("inserted after eject")
			}
			if _, err := vm.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: "http://127.0.0.1/live.iso"}); err != nil {
				t.Fatalf("insert: %v", err)
			}
			vm, _ = schemas.GetObject[schemas.VirtualMedia](c, vmID)
			if !gofish.Deref(vm.Inserted) || vm.Image != "http://127.0.0.1/live.iso" {
				t.Errorf("after insert: Inserted %v Image %q", gofish.Deref(vm.Inserted), vm.Image)
			}

			as, err := c.Service.AccountService()
			if err != nil {
				t.Fatal(err)
			}
			accts, err := as.Accounts()
			if err != nil {
				t.Fatal(err)
			}
			var me *schemas.ManagerAccount
			for _, a := range accts {
				if a.UserName == testUser {
					me = a
				}
			}
			if me == nil {
				t.Fatalf("no account %q among %d", testUser, len(accts))
			}
			me.Password = "rotated-1"
			if err := me.Update(); err != nil {
				t.Fatalf("gofish password update: %v", err)
			}
			c2 := gofishConnect(t, hc.base, testUser, "rotated-1")
			c2.Logout()
			if _, err := gofish.ConnectContext(t.Context(), gofish.ClientConfig{Endpoint: hc.base, Username: testUser, Password: testPass}); err == nil {
				t.Error("old password still logs in")
			}
			if n := b.OpenSessions(); n != 1 {
				t.Errorf("open sessions %d, want 1 (the first client's)", n)
			}
		})
	}
}

// gofish's AutoExpand asks for $expand where the service root advertises
// it (the Supermicro capture does): members come back inline and complete.
func TestGofishAutoExpand(t *testing.T) {
	b, hc := start(t, "supermicro-hgx-b200-partial", nil)
	c, err := gofish.ConnectContext(t.Context(), gofish.ClientConfig{Endpoint: hc.base, Username: testUser,
		Password: testPass, AutoExpand: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout()
	systems, err := c.Service.Systems()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range systems {
		got[s.ID] = string(s.PowerState)
	}
	want := map[string]string{"1": "On", "HGX_Baseboard_0": "On"}
	if len(got) != 2 || got["1"] != want["1"] || got["HGX_Baseboard_0"] != want["HGX_Baseboard_0"] {
		t.Errorf("expanded systems %v, want %v", got, want)
	}
	before := b.Stats().Requests
	if _, err := c.Service.Systems(); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().Requests - before; n != 1 {
		t.Errorf("expanded Systems took %d requests, want 1", n)
	}
}
