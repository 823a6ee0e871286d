package bmc

// This file reads drive, GPU and memory health for Readings.

import (
	"github.com/stmcginnis/gofish"
)

// health reads drive, GPU and memory health by the remembered plan,
// finding one first when there is none (or its parts moved).
func (c *Client) health(api *gofish.APIClient) *sample {
	c.mu.Lock()
	hp := c.healthPlan
	c.mu.Unlock()
	if hp == nil {
		c.healthProbing.Lock()
		c.mu.Lock()
		hp = c.healthPlan
		c.mu.Unlock()
		if hp == nil {
			var err error
			if hp, err = healthProbe(api); err != nil {
				c.healthProbing.Unlock()
				s := newSample()
				s.problems = append(s.problems, "health: "+problemDetail(err))
				return s
			}
			c.mu.Lock()
			c.healthPlan = hp
			c.mu.Unlock()
		}
		c.healthProbing.Unlock()
	}
	docs, errs := fetch(api, hp.sources)
	s := newSample()
	for i, src := range hp.sources {
		if errs[i] != nil {
			s.problems = append(s.problems, partName(src.uri)+": "+problemDetail(errs[i]))
			if kindOf(errs[i]) == KindNotFound {
				c.mu.Lock()
				if c.healthPlan == hp {
					c.healthPlan = nil // find the parts again next time
				}
				c.mu.Unlock()
			}
			continue
		}
		apply(s, src, docs[i], nil)
	}
	return s
}

// healthProbe finds where each System lists its GPUs, drives and memory
// errors: one expanded GET per collection where the BMC has $expand, else
// the GPUs and drives one by one (memory errors then are not read: a GET
// per DIMM).
func healthProbe(api *gofish.APIClient) (*healthPlan, error) {
	exp := expandOf(api)
	q := ""
	if exp.ok {
		q = exp.query(1)
	}
	coll, err := getDoc(api, "/redfish/v1/Systems"+q)
	if err != nil {
		return &healthPlan{}, downOnly(err)
	}
	systems := members(coll)
	if !exp.ok || len(systems) > 0 && len(systems[0]) <= 1 {
		srcs := make([]source, len(systems))
		for i, m := range systems {
			srcs[i] = source{uri: jstr(m, "@odata.id")}
		}
		docs, errs := fetch(api, srcs)
		systems = nil
		for i, d := range docs {
			if errs[i] != nil && down(errs[i]) {
				return nil, errs[i]
			}
			if d != nil {
				systems = append(systems, d)
			}
		}
	}
	hp := &healthPlan{}
	for _, sys := range systems {
		prefix := ""
		if len(systems) > 1 {
			prefix = firstNonEmpty(jstr(sys, "Id"), lastSegment(jstr(sys, "@odata.id"))) + "/"
		}
		srcs, err := systemHealth(api, sys, prefix, exp)
		if err != nil {
			return nil, err
		}
		hp.sources = append(hp.sources, srcs...)
	}
	return hp, nil
}

// systemHealth finds one System's health sources.
func systemHealth(api *gofish.APIClient, sys doc, prefix string, exp expandSupport) ([]source, error) {
	var out []source
	try := func(uri string, kind srcKind, found func(*sample) bool) error {
		d, err := getDoc(api, uri)
		if err != nil {
			return downOnly(err)
		}
		s := newSample()
		apply(s, source{kind: kind, prefix: prefix}, d, nil)
		if found(s) {
			out = append(out, source{uri: uri, kind: kind, prefix: prefix})
		}
		return nil
	}
	gpus := func(s *sample) bool { return len(s.gpus) > 0 }
	drives := func(s *sample) bool { return len(s.drives) > 0 }
	if u := jlink(sys, "Processors"); u != "" {
		if exp.ok {
			if err := try(u+exp.query(1), srcGPUs, gpus); err != nil {
				return nil, err
			}
		} else if err := eachMember(api, u, func(m string) error { return try(m, srcGPUs, gpus) }); err != nil {
			return nil, err
		}
	}
	switch u, su := jlink(sys, "Storage"), jlink(sys, "SimpleStorage"); {
	case u != "" && exp.deep():
		if err := try(u+exp.query(2), srcDrives, drives); err != nil {
			return nil, err
		}
	case u != "":
		err := eachMember(api, u, func(st string) error {
			d, err := getDoc(api, st)
			if err != nil {
				return downOnly(err)
			}
			for _, dr := range jarr(d, "Drives") {
				if err := try(jstr(dr, "@odata.id"), srcDrives, drives); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	case su != "" && exp.ok:
		if err := try(su+exp.query(1), srcSimpleStorage, drives); err != nil {
			return nil, err
		}
	case su != "":
		if err := eachMember(api, su, func(m string) error { return try(m, srcSimpleStorage, drives) }); err != nil {
			return nil, err
		}
	}
	if u := jlink(sys, "Memory"); u != "" && exp.deep() {
		err := try(u+exp.query(2), srcMemory, func(s *sample) bool { return s.memCorr >= 0 || s.memUncorr >= 0 })
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// eachMember calls fn for each member of a collection, one after another
// (a probe: the BMC's in-flight limit would serialize them anyway).
func eachMember(api *gofish.APIClient, coll string, fn func(string) error) error {
	d, err := getDoc(api, coll)
	if err != nil {
		return downOnly(err)
	}
	for _, m := range members(d) {
		if err := fn(jstr(m, "@odata.id")); err != nil {
			return err
		}
	}
	return nil
}

// parseGPUs reads GPU health from a Processors collection with its members
// inline, or from one Processor.
func parseGPUs(s *sample, d doc, prefix string) {
	procs := []doc{d}
	if _, ok := d["Members"]; ok {
		procs = members(d)
	}
	for _, p := range procs {
		switch jstr(p, "ProcessorType") {
		case "GPU", "Accelerator":
			health, state := status(p)
			if state == "Absent" {
				continue
			}
			s.gpus = append(s.gpus, GPUHealth{Name: prefix + firstNonEmpty(jstr(p, "Id"), jstr(p, "Name"), lastSegment(jstr(p, "@odata.id"))), Health: health})
		}
	}
}

// parseDrives reads drive health from a Storage collection expanded two
// levels (Storage, then its Drives), one Storage with its Drives inline, or
// one Drive.
func parseDrives(s *sample, d doc, prefix string) {
	switch {
	case d["Members"] != nil:
		for _, st := range members(d) {
			parseDrives(s, st, prefix)
		}
	case jtype(d) == "Drive":
		health, state := status(d)
		if state == "Absent" {
			return
		}
		pf, _ := d["FailurePredicted"].(bool)
		s.drives = append(s.drives, DriveHealth{Name: prefix + firstNonEmpty(jstr(d, "Id"), jstr(d, "Name"), lastSegment(jstr(d, "@odata.id"))),
			Health: health, PredictedFailure: pf})
	default:
		for _, dr := range jarr(d, "Drives") {
			if len(dr) > 1 {
				parseDrives(s, dr, prefix)
			}
		}
	}
}

// parseSimpleStorage reads the devices of a SimpleStorage collection (members
// inline) or of one SimpleStorage.
func parseSimpleStorage(s *sample, d doc, prefix string) {
	if d["Members"] != nil {
		for _, st := range members(d) {
			parseSimpleStorage(s, st, prefix)
		}
		return
	}
	for _, dev := range jarr(d, "Devices") {
		health, state := status(dev)
		if state == "Absent" {
			continue
		}
		s.drives = append(s.drives, DriveHealth{Name: prefix + jstr(dev, "Name"), Health: health})
	}
}

// parseMemoryErrors sums the ECC error counts of a Memory collection
// expanded two levels (each DIMM's MemoryMetrics inline): LifeTime counts,
// else CurrentPeriod. It reports whether any DIMM had counts.
func parseMemoryErrors(s *sample, d doc) bool {
	found := false
	for _, m := range members(d) {
		mm := inline(m, "Metrics")
		if mm == nil {
			continue
		}
		period := jobj(mm, "LifeTime")
		if period == nil {
			period = jobj(mm, "CurrentPeriod")
		}
		if n, ok := jnum(period["CorrectableECCErrorCount"]); ok {
			s.memCorr = max(s.memCorr, 0) + int64(n)
			found = true
		}
		if n, ok := jnum(period["UncorrectableECCErrorCount"]); ok {
			s.memUncorr = max(s.memUncorr, 0) + int64(n)
			found = true
		}
	}
	return found
}
