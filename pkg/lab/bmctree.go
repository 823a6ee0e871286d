package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// writeBMCTree writes the Redfish tree a lab machine's virtual BMC serves:
// one System (the QEMU VM) with the boot targets and reset types QEMU can
// honour, a BIOS with a settings object, one Manager with a virtual CD
// drive, one Chassis, and an UpdateService (updateServiceTree). It is
// ingot's own description of a QEMU machine, not a copy of a vendor
// capture.
func writeBMCTree(dir, name string, memMiB int) error {
	sys := "/redfish/v1/Systems/1"
	res := map[string]map[string]any{
		"": {
			"@odata.id": "/redfish/v1", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
			"Id": "RootService", "Name": "ingot lab BMC", "RedfishVersion": "1.15.0",
			"UUID":    "7f3c0e52-5a1d-4b8e-9d1e-000000000001",
			"Systems": ref("/redfish/v1/Systems"), "Chassis": ref("/redfish/v1/Chassis"),
			"Managers": ref("/redfish/v1/Managers"), "AccountService": ref("/redfish/v1/AccountService"),
			"SessionService": ref("/redfish/v1/SessionService"),
			"Links":          map[string]any{"Sessions": ref("/redfish/v1/SessionService/Sessions")},
		},
		"Systems": collection("/redfish/v1/Systems", "#ComputerSystemCollection.ComputerSystemCollection", sys),
		"Systems/1": {
			"@odata.id": sys, "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
			"Id": "1", "Name": name, "SystemType": "Virtual", "Manufacturer": "QEMU",
			"Model": "Standard PC", "SerialNumber": "LAB-" + name, "PowerState": "Off",
			"BiosVersion":      "ingot-lab-1",
			"Status":           map[string]any{"State": "Enabled", "Health": "OK"},
			"ProcessorSummary": map[string]any{"Count": 1, "Model": "QEMU Virtual CPU"},
			"MemorySummary":    map[string]any{"TotalSystemMemoryGiB": float64(memMiB) / 1024},
			"Boot": map[string]any{
				"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
				"BootSourceOverrideMode":                           "UEFI",
				"BootSourceOverrideTarget@Redfish.AllowableValues": []string{"None", "Pxe", "Hdd", "Cd", "UefiHttp"},
			},
			"Bios": ref(sys + "/Bios"),
			"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
				"target":                            sys + "/Actions/ComputerSystem.Reset",
				"ResetType@Redfish.AllowableValues": []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle"},
			}},
			"Links": map[string]any{"Chassis": []any{ref("/redfish/v1/Chassis/1")}, "ManagedBy": []any{ref("/redfish/v1/Managers/1")}},
		},
		"Systems/1/Bios": {
			"@odata.id": sys + "/Bios", "@odata.type": "#Bios.v1_2_0.Bios", "Id": "Bios", "Name": "BIOS Configuration",
			"AttributeRegistry": "BiosAttributeRegistry.v1_0_0",
			"Attributes":        map[string]any{"BootMode": "Uefi", "SriovGlobalEnable": "Disabled", "ProcVirtualization": "Enabled", "NumaMode": "Enabled"},
			"@Redfish.Settings": map[string]any{"@odata.type": "#Settings.v1_3_5.Settings", "SettingsObject": ref(sys + "/Bios/Settings")},
		},
		"Systems/1/Bios/Settings": {
			"@odata.id": sys + "/Bios/Settings", "@odata.type": "#Bios.v1_2_0.Bios", "Id": "Settings", "Name": "BIOS pending settings",
			"Attributes": map[string]any{},
		},
		"Chassis": collection("/redfish/v1/Chassis", "#ChassisCollection.ChassisCollection", "/redfish/v1/Chassis/1"),
		"Chassis/1": {
			"@odata.id": "/redfish/v1/Chassis/1", "@odata.type": "#Chassis.v1_23_0.Chassis", "Id": "1", "Name": name + " chassis",
			"ChassisType": "RackMount", "Manufacturer": "QEMU", "Status": map[string]any{"State": "Enabled", "Health": "OK"},
		},
		"Managers": collection("/redfish/v1/Managers", "#ManagerCollection.ManagerCollection", "/redfish/v1/Managers/1"),
		"Managers/1": {
			"@odata.id": "/redfish/v1/Managers/1", "@odata.type": "#Manager.v1_19_0.Manager", "Id": "1", "Name": "ingot virtual BMC",
			"ManagerType": "BMC", "FirmwareVersion": LabBMCFirmware, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
			"VirtualMedia": ref("/redfish/v1/Managers/1/VirtualMedia"),
		},
		// One virtual CD drive: what is inserted goes into the VM's CD
		// drive (vbmc's QEMU backend fetches it at power-on).
		"Managers/1/VirtualMedia": collection("/redfish/v1/Managers/1/VirtualMedia", "#VirtualMediaCollection.VirtualMediaCollection", "/redfish/v1/Managers/1/VirtualMedia/CD1"),
		"Managers/1/VirtualMedia/CD1": {
			"@odata.id": "/redfish/v1/Managers/1/VirtualMedia/CD1", "@odata.type": "#VirtualMedia.v1_6_0.VirtualMedia",
			"Id": "CD1", "Name": "Virtual CD", "MediaTypes": []string{"CD", "DVD"}, "Image": nil, "ImageName": nil,
			"Inserted": false, "WriteProtected": true, "ConnectedVia": "NotConnected", "TransferProtocolType": "HTTP",
			"Actions": map[string]any{
				"#VirtualMedia.InsertMedia": map[string]any{"target": "/redfish/v1/Managers/1/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia"},
				"#VirtualMedia.EjectMedia":  map[string]any{"target": "/redfish/v1/Managers/1/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia"},
			},
		},
		"AccountService": {
			"@odata.id": "/redfish/v1/AccountService", "@odata.type": "#AccountService.v1_13_0.AccountService",
			"Id": "AccountService", "Name": "Account Service", "Accounts": ref("/redfish/v1/AccountService/Accounts"),
		},
		"AccountService/Accounts": collection("/redfish/v1/AccountService/Accounts", "#ManagerAccountCollection.ManagerAccountCollection", "/redfish/v1/AccountService/Accounts/1"),
		"AccountService/Accounts/1": {
			"@odata.id": "/redfish/v1/AccountService/Accounts/1", "@odata.type": "#ManagerAccount.v1_10_0.ManagerAccount",
			"Id": "1", "Name": "User Account", "UserName": "admin", "RoleId": "Administrator", "Enabled": true,
		},
	}
	updateServiceTree(res, sys)
	return writeTree(dir, res)
}

// writeTree writes each resource as PATH/index.json under dir/redfish/v1,
// each file whole (the virtual BMC may be reading the tree).
func writeTree(dir string, res map[string]map[string]any) error {
	for p, body := range res {
		d := filepath.Join(dir, "redfish", "v1", filepath.FromSlash(p))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			return err
		}
		if err := durable.WriteFile(filepath.Join(d, "index.json"), b, 0o644); err != nil {
			return fmt.Errorf("writing the lab BMC tree: %w", err)
		}
	}
	return nil
}

// LabBMCFirmware is the firmware a lab BMC runs when the lab comes up.
const LabBMCFirmware = "1.0.0"

// updateServiceTree adds the UpdateService the virtual BMC runs firmware
// updates on (pkg/vbmc: SimpleUpdate fetching an http ImageURI, a task,
// the new version in the entry and the Manager's FirmwareVersion or the
// System's BiosVersion it relates to): a FirmwareInventory of the BMC's
// own firmware and the VM's BIOS.
func updateServiceTree(res map[string]map[string]any, sys string) {
	const us = "/redfish/v1/UpdateService"
	res[""]["UpdateService"] = ref(us)
	res["UpdateService"] = map[string]any{
		"@odata.id": us, "@odata.type": "#UpdateService.v1_11_0.UpdateService", "Id": "UpdateService", "Name": "Update Service",
		"ServiceEnabled": true, "FirmwareInventory": ref(us + "/FirmwareInventory"),
		"Actions": map[string]any{"#UpdateService.SimpleUpdate": map[string]any{
			"target": us + "/Actions/UpdateService.SimpleUpdate",
			"TransferProtocol@Redfish.AllowableValues": []string{"HTTP", "HTTPS"},
		}},
	}
	res["UpdateService/FirmwareInventory"] = collection(us+"/FirmwareInventory", "#SoftwareInventoryCollection.SoftwareInventoryCollection",
		us+"/FirmwareInventory/BMC", us+"/FirmwareInventory/BIOS")
	for _, fw := range []struct{ id, name, version, related string }{
		{"BMC", "ingot virtual BMC", LabBMCFirmware, "/redfish/v1/Managers/1"},
		{"BIOS", "QEMU VM BIOS", "ingot-lab-1", sys},
	} {
		res["UpdateService/FirmwareInventory/"+fw.id] = map[string]any{
			"@odata.id": us + "/FirmwareInventory/" + fw.id, "@odata.type": "#SoftwareInventory.v1_10_0.SoftwareInventory",
			"Id": fw.id, "Name": fw.name, "Version": fw.version, "Updateable": true, "Status": map[string]any{"State": "Enabled", "Health": "OK"},
			"RelatedItem": []any{ref(fw.related)},
		}
	}
}

func ref(id string) map[string]any { return map[string]any{"@odata.id": id} }

func collection(id, typ string, members ...string) map[string]any {
	ms := make([]any, len(members))
	for i, m := range members {
		ms[i] = ref(m)
	}
	return map[string]any{"@odata.id": id, "@odata.type": typ, "Name": "Collection", "Members": ms, "Members@odata.count": len(ms)}
}
