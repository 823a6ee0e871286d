package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// RunBMCs serves one virtual BMC per lab VM, each on 127.0.0.1:BMCPort of
// the namespace it runs in, each powering its VM's QEMU process. It runs
// until ctx ends, then powers the VMs off.
func RunBMCs(ctx context.Context, dir string, log *slog.Logger) error {
	st, err := Load(dir)
	if err != nil {
		return err
	}
	pw, err := os.ReadFile(filepath.Join(dir, "bmc.password"))
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(st.VMs))
	var backends []*vbmc.QEMU
	for _, vm := range st.VMs {
		args, boot := vm.qemuArgs(st.Accel)
		qlog, err := os.OpenFile(filepath.Join(filepath.Dir(vm.Console), "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer qlog.Close()
		if _, ok := boot["Cd"]; !ok {
			// Booting the virtual CD: the backend adds the CD drive with
			// bootindex=0, ahead of the disk and NIC as a disk boot has them.
			boot["Cd"] = boot["Hdd"]
		}
		// The BMC's virtual media is fetched into the VM's folder.
		q := &vbmc.QEMU{Binary: vm.Binary(), Args: args, BootArgs: boot, Stdout: qlog, Stderr: qlog, Logger: log.With("vm", vm.Name),
			MediaDir: filepath.Dir(vm.Console)}
		backends = append(backends, q)
		// The BMC serves the VM's serial console (vm.Console, which QEMU's
		// -serial chardev writes) as its HostLogger log service.
		b, err := vbmc.New(vbmc.Config{Root: filepath.Join(dir, "bmc", vm.Name), Username: bmcUser,
			Password: strings.TrimSpace(string(pw)), Backend: q, Console: vm.Console, Logger: log.With("bmc", vm.Name)})
		if err != nil {
			return fmt.Errorf("BMC of %s: %w", vm.Name, err)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", vm.BMCPort))
		if err != nil {
			return fmt.Errorf("BMC of %s: %w", vm.Name, err)
		}
		log.Info("virtual BMC up", "vm", vm.Name, "addr", ln.Addr().String(), "firmware", vm.Firmware, "qemu", vm.Binary(), "accel", vm.accel(st.Accel))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := vbmc.Serve(ctx, ln, b, nil); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	<-ctx.Done()
	for _, q := range backends {
		_ = q.PowerOff(context.Background())
	}
	wg.Wait()
	close(errc)
	return <-errc
}
