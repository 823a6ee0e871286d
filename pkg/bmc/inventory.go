package bmc

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// reading collects one inventory read: parts found and problems met. It is
// shared by the goroutines of one read.
type reading struct {
	mu       sync.Mutex
	problems []machine.Problem
}

// problem records err against part (a Redfish URI): the part is missing
// from the inventory, the rest is kept. A gofish CollectionError becomes one
// problem per failed member.
func (r *reading) problem(part string, err error) {
	if err == nil || absent(err) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var ce *schemas.CollectionError
	if errors.As(err, &ce) {
		for link, e := range ce.Failures {
			r.problems = append(r.problems, machine.Problem{Part: partName(link), Detail: problemDetail(e)})
		}
		return
	}
	r.problems = append(r.problems, machine.Problem{Part: partName(part), Detail: problemDetail(err)})
}

// partName trims the service root from a URI: Systems/1/Storage/1.
func partName(uri string) string {
	return strings.Trim(strings.TrimPrefix(uri, "/redfish/v1"), "/")
}

// problemDetail describes err without the endpoint (an inventory names its
// machine elsewhere, and golden files must not depend on a port).
func problemDetail(err error) string {
	e := wrapErr("", "", err).(*Error)
	s := e.Kind.String()
	if e.Status != 0 {
		s += " (HTTP " + itoa(e.Status) + ")"
	}
	switch {
	case len(e.Messages) > 0:
		s += ": " + strings.Join(e.Messages, "; ")
	case e.Kind == KindBadResponse && e.Err != nil && e.Status == 200:
		s += ": " + e.Err.Error()
	case e.Err != nil && e.Status == 0:
		s += ": " + e.Err.Error()
	}
	return s
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

// parallel runs fns concurrently and waits. Requests stay bounded by the
// per-BMC limit in the RoundTripper.
func parallel(fns ...func()) {
	var wg sync.WaitGroup
	for _, f := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}

// Inventory reads every System, Chassis and Manager and the firmware
// inventory, and normalizes them. A part the BMC answers badly becomes a
// machine.Problem; only a BMC that answers nothing at all (or a canceled
// ctx) makes it fail. Taken is left for the caller to set.
func (c *Client) Inventory(ctx context.Context) (machine.Inventory, error) {
	inv := machine.Inventory{Source: "redfish"}
	api, err := c.gf(ctx)
	if err != nil {
		return inv, err
	}
	r := &reading{}
	var sys []systemPart
	var chs []chassisPart
	var mgr managerPart
	var fw []firmwareItem
	var sysErr, chErr error
	parallel(
		func() { sys, sysErr = c.readSystems(api, r) },
		func() { chs, chErr = c.readChassis(api, r) },
		func() { mgr = c.readManagers(api, r) },
		func() { fw = c.readFirmware(api, r) },
	)
	if ctx.Err() != nil {
		return inv, c.wrap("reading inventory", ctx.Err())
	}
	if sysErr != nil && chErr != nil && fatal(sysErr) && fatal(chErr) {
		return inv, c.wrap("reading inventory", sysErr)
	}
	if !anyGPU(sys) {
		readHPEGPUs(api, sys, chs, r) // HPE iLO 5: GPUs only in OEM resources (hpe.go)
		for i := range sys {
			hpeGPUFirmware(sys[i].gpus, fw)
		}
		if ctx.Err() != nil {
			return inv, c.wrap("reading inventory", ctx.Err())
		}
	}
	assemble(&inv, sys, chs, mgr, fw)
	inv.Problems = r.problems
	sort.Slice(inv.Problems, func(i, j int) bool {
		a, b := inv.Problems[i], inv.Problems[j]
		if a.Part != b.Part {
			return a.Part < b.Part
		}
		return a.Detail < b.Detail
	})
	return inv, nil
}

// anyGPU reports whether a System's Processors list a GPU.
func anyGPU(systems []systemPart) bool {
	for _, s := range systems {
		if len(s.gpus) > 0 {
			return true
		}
	}
	return false
}

// fatal errors mean the BMC itself is gone, not one part of it.
func fatal(err error) bool {
	e := wrapErr("", "", err).(*Error)
	switch e.Kind {
	case KindTimeout, KindUnreachable, KindAuth, KindCanceled:
		return true
	}
	return false
}

// systemPart is what one System contributes.
type systemPart struct {
	sys   *schemas.ComputerSystem
	cpus  []machine.CPU
	gpus  []machine.GPU
	dimms []machine.DIMM
	nics  []machine.NIC
	disks []machine.Disk
}

func (c *Client) readSystems(api *gofish.APIClient, r *reading) ([]systemPart, error) {
	systems, err := api.Service.Systems()
	r.problem("/redfish/v1/Systems", err)
	if len(systems) == 0 && err != nil {
		return nil, err
	}
	parts := make([]systemPart, len(systems))
	var fns []func()
	for i, s := range systems {
		parts[i].sys = s
		p := &parts[i]
		fns = append(fns,
			func() { p.cpus, p.gpus = readProcessors(s, r) },
			func() { p.dimms = readMemory(s, r) },
			func() { p.nics = readEthernet(s, r) },
			func() { p.disks = readStorage(s, r) },
		)
	}
	parallel(fns...)
	return parts, nil
}

func readProcessors(s *schemas.ComputerSystem, r *reading) ([]machine.CPU, []machine.GPU) {
	procs, err := s.Processors()
	r.problem(s.ODataID+"/Processors", err)
	var cpus []machine.CPU
	gpus := make([]machine.GPU, 0, len(procs))
	var fns []func()
	for _, p := range procs {
		switch p.ProcessorType {
		case schemas.CPUProcessorType, "":
			cpus = append(cpus, normCPU(p))
		case schemas.GPUProcessorType, schemas.AcceleratorProcessorType:
			gpus = append(gpus, normGPU(p))
			g := &gpus[len(gpus)-1]
			fns = append(fns, func() { enrichGPU(p, g, r) })
		}
	}
	parallel(fns...)
	if len(gpus) == 0 {
		gpus = nil
	}
	return cpus, gpus
}

// enrichGPU follows a GPU's links for what its own resource lacks: VRAM
// from its Memory, the PCIe link from its PCIeDevice.
func enrichGPU(p *schemas.Processor, g *machine.GPU, r *reading) {
	if g.VRAMMiB == 0 && len(processorLinks(p.RawData, "Memory")) > 0 {
		mems, err := p.Memory()
		r.problem(p.ODataID+"/Links/Memory", err)
		for _, m := range mems {
			if m.CapacityMiB != nil {
				g.VRAMMiB += int64(*m.CapacityMiB)
			}
		}
	}
	if g.LinkCurrent.Width == 0 && len(processorLinks(p.RawData, "PCIeDevice")) > 0 {
		dev, err := p.PCIeDevice()
		r.problem(p.ODataID+"/Links/PCIeDevice", err)
		if dev != nil {
			g.LinkCurrent, g.LinkMax = pcieLinks(dev.PCIeInterface)
			if g.Firmware == "" {
				g.Firmware = dev.FirmwareVersion
			}
		}
	}
}

func readMemory(s *schemas.ComputerSystem, r *reading) []machine.DIMM {
	if link(s.RawData, "Memory") == "" {
		return nil
	}
	mems, err := s.Memory()
	r.problem(s.ODataID+"/Memory", err)
	var out []machine.DIMM
	for _, m := range mems {
		if d, ok := normDIMM(m); ok {
			out = append(out, d)
		}
	}
	return out
}

func readEthernet(s *schemas.ComputerSystem, r *reading) []machine.NIC {
	if link(s.RawData, "EthernetInterfaces") == "" {
		return nil
	}
	eths, err := s.EthernetInterfaces()
	r.problem(s.ODataID+"/EthernetInterfaces", err)
	var out []machine.NIC
	for _, e := range eths {
		out = append(out, normEthernet(e))
	}
	return out
}

func readStorage(s *schemas.ComputerSystem, r *reading) []machine.Disk {
	if link(s.RawData, "Storage") == "" {
		return readSimpleStorage(s, r)
	}
	stores, err := s.Storage()
	r.problem(s.ODataID+"/Storage", err)
	perStore := make([][]machine.Disk, len(stores))
	var fns []func()
	for i, st := range stores {
		fns = append(fns, func() {
			drives, err := st.Drives()
			r.problem(st.ODataID+"/Drives", err)
			for _, d := range drives {
				perStore[i] = append(perStore[i], normDrive(d))
			}
		})
	}
	parallel(fns...)
	var out []machine.Disk
	for _, d := range perStore {
		out = append(out, d...)
	}
	return out
}

// readSimpleStorage reads the older SimpleStorage (DMTF rackmount1 has only
// that): its Devices are the disks.
func readSimpleStorage(s *schemas.ComputerSystem, r *reading) []machine.Disk {
	if link(s.RawData, "SimpleStorage") == "" {
		return nil
	}
	ss, err := s.SimpleStorage()
	r.problem(s.ODataID+"/SimpleStorage", err)
	var out []machine.Disk
	for _, st := range ss {
		for _, d := range st.Devices {
			if disk, ok := normSimpleDevice(d); ok {
				out = append(out, disk)
			}
		}
	}
	return out
}

// chassisPart is what one Chassis contributes.
type chassisPart struct {
	id       string
	devices  string // HPE Oem.Hpe.Links.Devices, read only by the GPU fallback
	psus     []machine.PSU
	power    machine.Power
	thermal  machine.Thermal
	adapters []adapter
}

func (c *Client) readChassis(api *gofish.APIClient, r *reading) ([]chassisPart, error) {
	chassis, err := api.Service.Chassis()
	r.problem("/redfish/v1/Chassis", err)
	if len(chassis) == 0 && err != nil {
		return nil, err
	}
	parts := make([]chassisPart, len(chassis))
	var fns []func()
	for i, ch := range chassis {
		p := &parts[i]
		p.id = ch.ID
		p.devices = hpeLinks(ch.RawData, "Devices")
		fns = append(fns,
			func() { p.psus, p.power = readPower(ch, r) },
			func() { p.thermal = readThermal(ch, r) },
			func() { p.adapters = readAdapters(ch, r) },
		)
	}
	parallel(fns...)
	return parts, nil
}

// readPower reads PSUs (PowerSubsystem preferred: PowerSupply v1 fields;
// else the legacy Power resource) and watts now (Power.PowerControl, else
// EnvironmentMetrics).
func readPower(ch *schemas.Chassis, r *reading) ([]machine.PSU, machine.Power) {
	var psus []machine.PSU
	var pw machine.Power
	if link(ch.RawData, "Power") != "" {
		p, err := ch.Power()
		r.problem(ch.ODataID+"/Power", err)
		if p != nil {
			pw = normPowerControl(p.PowerControl)
			for _, s := range p.PowerSupplies {
				psus = append(psus, normLegacyPSU(s, p.Redundancy))
			}
		}
	}
	if l := link(ch.RawData, "PowerSubsystem"); l != "" {
		var ps powerSubsystemDoc
		_, err := getJSON(ch.GetClient(), l, &ps)
		r.problem(l, err)
		if pl := ps.PowerSupplies.ID; pl != "" {
			units, err := schemas.ListReferencedPowerSupplyUnits(ch.GetClient(), pl)
			r.problem(pl, err)
			if len(units) > 0 || err == nil {
				psus = nil
				for _, u := range units {
					psus = append(psus, normPSU(u, ps.redundancy()))
				}
			}
		}
		if pw.CapacityWatts == 0 && ps.CapacityWatts != nil {
			pw.CapacityWatts = int(*ps.CapacityWatts + 0.5)
		}
	}
	if l := link(ch.RawData, "EnvironmentMetrics"); pw.Watts == 0 && l != "" {
		em, err := ch.EnvironmentMetrics()
		r.problem(l, err)
		if em != nil && em.PowerWatts.Reading != nil {
			pw.Watts = int(*em.PowerWatts.Reading + 0.5)
		}
	}
	return psus, pw
}

func readThermal(ch *schemas.Chassis, r *reading) machine.Thermal {
	var t machine.Thermal
	if l := link(ch.RawData, "Thermal"); l != "" {
		th, err := ch.Thermal()
		r.problem(l, err)
		if th != nil {
			t = normThermal(th)
		}
		return t
	}
	if l := link(ch.RawData, "ThermalSubsystem"); l != "" {
		ts, err := ch.ThermalSubsystem()
		r.problem(l, err)
		if ts != nil && link(ts.RawData, "ThermalMetrics") != "" {
			tm, err := ts.ThermalMetrics()
			r.problem(l+"/ThermalMetrics", err)
			if tm != nil {
				for _, s := range tm.TemperatureReadingsCelsius {
					if s.Reading != nil {
						t.Temperatures = append(t.Temperatures, machine.Reading{Name: sensorName(s), Value: *s.Reading, Unit: "Cel"})
					}
				}
			}
		}
	}
	return t
}

// adapter is one NetworkAdapter with its ports.
type adapter struct {
	id, vendor, model, firmware string
	chassis                     string // Id of the Chassis holding it
	multi                       bool   // the BMC has more than one Chassis
	ports                       []machine.NIC
}

func readAdapters(ch *schemas.Chassis, r *reading) []adapter {
	l := link(ch.RawData, "NetworkAdapters")
	if l == "" {
		return nil
	}
	nas, err := ch.NetworkAdapters()
	r.problem(l, err)
	out := make([]adapter, len(nas))
	var fns []func()
	for i, na := range nas {
		out[i] = normAdapter(na)
		a := &out[i]
		fns = append(fns, func() {
			switch {
			case link(na.RawData, "Ports") != "":
				ports, err := na.Ports()
				r.problem(na.ODataID+"/Ports", err)
				for _, p := range ports {
					a.ports = append(a.ports, normPort(a, p))
				}
			case link(na.RawData, "NetworkPorts") != "":
				ports, err := na.NetworkPorts()
				r.problem(na.ODataID+"/NetworkPorts", err)
				for _, p := range ports {
					a.ports = append(a.ports, normNetworkPort(a, p))
				}
			}
		})
	}
	parallel(fns...)
	return out
}

// managerPart is the BMC's own firmware.
type managerPart struct{ version string }

func (c *Client) readManagers(api *gofish.APIClient, r *reading) managerPart {
	mgrs, err := api.Service.Managers()
	r.problem("/redfish/v1/Managers", err)
	for _, m := range mgrs {
		if m.ManagerType == schemas.BMCManagerType || m.ManagerType == "" {
			return managerPart{version: m.FirmwareVersion}
		}
	}
	if len(mgrs) > 0 {
		return managerPart{version: mgrs[0].FirmwareVersion}
	}
	return managerPart{}
}

func (c *Client) readFirmware(api *gofish.APIClient, r *reading) []firmwareItem {
	us, err := api.Service.UpdateService()
	if absent(err) {
		return nil
	}
	r.problem("/redfish/v1/UpdateService", err)
	if us == nil || link(us.RawData, "FirmwareInventory") == "" {
		return nil
	}
	items, err := us.FirmwareInventory()
	r.problem("/redfish/v1/UpdateService/FirmwareInventory", err)
	var out []firmwareItem
	for _, it := range items {
		if it.Version != "" {
			fi := firmwareItem{id: strings.TrimSpace(it.ID), name: strings.TrimSpace(it.Name),
				context: hpeDeviceContext(it.RawData), version: it.Version}
			fi.fill(it.RawData)
			out = append(out, fi)
		}
	}
	return nameFirmware(out)
}

// FirmwareInventory lists the firmware versions the BMC reports: its
// UpdateService/FirmwareInventory plus the BIOS and BMC versions.
func (c *Client) FirmwareInventory(ctx context.Context) ([]machine.Firmware, error) {
	api, err := c.gf(ctx)
	if err != nil {
		return nil, err
	}
	r := &reading{}
	var fw []firmwareItem
	var mgr managerPart
	var sys *schemas.ComputerSystem
	parallel(
		func() { fw = c.readFirmware(api, r) },
		func() { mgr = c.readManagers(api, r) },
		func() {
			s, err := c.system(ctx)
			r.problem("/redfish/v1/Systems", err)
			sys = s
		},
	)
	if ctx.Err() != nil {
		return nil, c.wrap("reading firmware inventory", ctx.Err())
	}
	bios := ""
	if sys != nil {
		bios = sys.BiosVersion
	}
	out := mergeFirmware(bios, mgr.version, fw)
	if len(out) == 0 && len(r.problems) > 0 {
		return nil, &Error{Kind: KindNotFound, Endpoint: c.cfg.Endpoint, Op: "reading firmware inventory",
			Err: errors.New(r.problems[0].Part + ": " + r.problems[0].Detail)}
	}
	return out, nil
}

// absent is gofish's error for a link the resource does not have ("no
// target provided", status 0): nothing to read, not a problem.
func absent(err error) bool {
	var se *schemas.Error
	var be *Error
	return errors.As(err, &se) && se.HTTPReturnedStatusCode == 0 && !errors.As(err, &be)
}

// powerSubsystemDoc is read raw: gofish keeps the PowerSupplies link private.
type powerSubsystemDoc struct {
	CapacityWatts *float64 `json:"CapacityWatts"`
	PowerSupplies struct {
		ID string `json:"@odata.id"`
	} `json:"PowerSupplies"`
	PowerSupplyRedundancy []struct {
		RedundancyType   string `json:"RedundancyType"`
		MinNeededInGroup *int   `json:"MinNeededInGroup"`
	} `json:"PowerSupplyRedundancy"`
}

func (d powerSubsystemDoc) redundancy() string {
	for _, g := range d.PowerSupplyRedundancy {
		if g.RedundancyType != "" {
			return g.RedundancyType
		}
	}
	return ""
}
