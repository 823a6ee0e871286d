package lab

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// The lab's state file is read by other processes (the virtual BMCs at
// their start, `ingot lab status`, the tests) while `lab up` rewrites it:
// a reader polling it while the writer rewrites it must only ever see a
// whole file. With os.WriteFile (truncate, then write) a reader found it
// empty or cut: "lab.json: unexpected end of JSON input", which made
// TestE2ELabProxy's virtual BMC exit under load.
func TestStateFileReadWhileRewritten(t *testing.T) {
	dir := t.TempDir()
	l := &Lab{cfg: Config{Dir: dir}, State: State{Namespace: "ingot-lab-t", Dir: dir}}
	for i := range 16 { // a state of some kilobytes, as a lab of 16 VMs has
		l.State.VMs = append(l.State.VMs, VM{Name: fmt.Sprintf("lab%d-uefi", i+1), MAC: fmt.Sprintf("52:54:00:77:00:%02x", 0x10+i),
			Disk: fmt.Sprintf("%s/vms/lab%d-uefi/disk.raw", dir, i+1), BMCPort: 9000 + i})
	}
	if err := l.save(); err != nil {
		t.Fatal(err)
	}
	const rewrites = 200
	var wg sync.WaitGroup
	done, stop := make(chan struct{}), make(chan struct{})
	defer wg.Wait()
	defer close(stop) // a failed read stops the writer before the folder goes
	wg.Go(func() {
		defer close(done)
		for i := range rewrites {
			select {
			case <-stop:
				return
			default:
			}
			l.State.Pids = append(l.State.Pids, 1000+i)
			if err := l.save(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	reads := 0
	deadline := time.After(time.Minute)
	for {
		select {
		case <-done:
			if reads < rewrites/10 {
				t.Errorf("only %d reads during %d rewrites: the reader did not race the writer", reads, rewrites)
			}
			t.Logf("%d reads during %d rewrites, each a whole state", reads, rewrites)
			return
		case <-deadline:
			t.Fatal("the writer did not finish within a minute")
		default:
		}
		st, err := Load(dir)
		if err != nil {
			t.Fatalf("read %d during a rewrite: %v", reads, err)
		}
		if len(st.VMs) != 16 {
			t.Fatalf("read %d: %d VMs, want 16", reads, len(st.VMs))
		}
		reads++
	}
}
