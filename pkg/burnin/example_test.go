package burnin_test

import (
	"errors"
	"fmt"

	"github.com/ingot-dev/ingot/pkg/burnin"
)

func ExampleParseNCCL() {
	out := []byte(`#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  1073741824     268435456     float     sum      -1   4501.1  238.55  417.46      0   4498.7  238.68  417.69      0
  8589934592    2147483648     float     sum      -1    35161  244.30  427.53      0    35154  244.35  427.61      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 422.573
`)
	r, err := burnin.ParseNCCL(out)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("passed=%v peak busbw over >=1GiB messages: %.2f GB/s\n", r.Passed(), r.MaxBusBW(1<<30)/1e9)
	// Output: passed=true peak busbw over >=1GiB messages: 427.61 GB/s
}

func ExampleParseGPUBurn() {
	_, err := burnin.ParseGPUBurn([]byte("\r50.0%  proc'd: 1960 (292010 Gflop/s)   errors: 0   temps: 52 C \n"))
	fmt.Println(errors.Is(err, burnin.ErrIncomplete))
	fmt.Println(err)
	// Output:
	// true
	// gpu-burn: no "Tested N GPUs:" block: output ends early: the run did not finish
}

func ExampleSummary() {
	samples, _ := burnin.ParseGPUSamples([]byte("0, 00000000:18:00.0, 71, 699.12, 0x0000000000000000\n0, 00000000:18:00.0, 74, 700.03, 0x0000000000000004\n"))
	xids, _ := burnin.ParseXIDs([]byte("[ 2211.400112] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"))
	var s burnin.Summary
	s.AddSamples(samples)
	s.AddXIDs(xids)
	for _, g := range s.GPUs() {
		fmt.Printf("GPU %d (%s): max %.0f C, max %.2f W, throttle %#x, Xids %v\n", g.Index, g.PCI, g.MaxTempCelsius, g.MaxPowerWatts, g.ThrottleReasons, g.XIDCodes)
	}
	// Output: GPU 0 (0000:18:00): max 74 C, max 700.03 W, throttle 0x4, Xids [79]
}
