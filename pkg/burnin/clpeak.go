package burnin

import (
	"regexp"
	"strings"
)

const toolClpeak = "clpeak"

var (
	clPlatformRe = regexp.MustCompile(`^Platform: (.*)$`)
	clDeviceRe   = regexp.MustCompile(`^Device: (.*)$`)
	// "Single-precision compute (GFLOPS)", "Global memory bandwidth (GBPS)"
	clTestRe = regexp.MustCompile(`^([A-Z][A-Za-z0-9 ()-]*?) \((GFLOPS|GBPS|GIOPS)\)$`)
	// "float16 : 51020.98", "enqueueWriteBuffer              : 24.51"
	clValueRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9 ()]*?)\s*:\s*(\S+)$`)
	// "No half precision support! Skipped", "No double precision support! Skipped"
	clSkipRe = regexp.MustCompile(`(?i)skipped`)
)

// ClpeakResult is one clpeak run over every OpenCL platform and device.
type ClpeakResult struct {
	Devices []ClpeakDevice // in output order
}

// ClpeakDevice is one OpenCL device. Index counts the devices of its
// platform from 0, the order the platform lists them in.
type ClpeakDevice struct {
	Platform string
	Name     string
	Index    int
	Tests    []ClpeakTest
}

// ClpeakTest is one of clpeak's tests on a device: the best of its vector
// widths, in SI units (flop/s, bytes/s, integer ops/s).
type ClpeakTest struct {
	Name    string // "Single-precision compute"
	Unit    string // as printed: GFLOPS, GBPS, GIOPS
	Best    float64
	Skipped bool // "No ... support! Skipped"
}

// Test returns the device's test named name.
func (d ClpeakDevice) Test(name string) (ClpeakTest, bool) {
	for _, t := range d.Tests {
		if t.Name == name {
			return t, true
		}
	}
	return ClpeakTest{}, false
}

// ParseClpeak parses clpeak's text output. Lines that are not clpeak's are
// skipped. No device at all wraps ErrIncomplete.
func ParseClpeak(data []byte) (ClpeakResult, error) {
	var res ClpeakResult
	platform := ""
	perPlatform := map[string]int{}
	var test *ClpeakTest
	for _, raw := range splitLines(data) {
		s := strings.TrimSpace(raw)
		var dev *ClpeakDevice
		if len(res.Devices) > 0 {
			dev = &res.Devices[len(res.Devices)-1]
		}
		switch {
		case clPlatformRe.MatchString(s):
			platform, test = clPlatformRe.FindStringSubmatch(s)[1], nil
		case clDeviceRe.MatchString(s):
			res.Devices = append(res.Devices, ClpeakDevice{Platform: platform, Name: clDeviceRe.FindStringSubmatch(s)[1], Index: perPlatform[platform]})
			perPlatform[platform]++
			test = nil
		case dev != nil && clTestRe.MatchString(s):
			m := clTestRe.FindStringSubmatch(s)
			dev.Tests = append(dev.Tests, ClpeakTest{Name: m[1], Unit: m[2]})
			test = &dev.Tests[len(dev.Tests)-1]
		case test != nil && clSkipRe.MatchString(s):
			test.Skipped = true
		case test != nil && clValueRe.MatchString(s):
			if v, err := parseRate(clValueRe.FindStringSubmatch(s)[2]); err == nil {
				test.Best = max(test.Best, v*clScale(test.Unit))
			}
		case s == "" || strings.Contains(s, "latency"):
			test = nil
		}
	}
	if len(res.Devices) == 0 {
		return res, incomplete(toolClpeak, "no \"Device:\" listed: clpeak found no OpenCL device")
	}
	return res, nil
}

// clScale converts clpeak's G-units to SI: GFLOPS and GIOPS are 1e9
// operations per second, GBPS 1e9 bytes per second.
func clScale(string) float64 { return 1e9 }
