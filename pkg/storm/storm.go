// Package storm is a boot storm: hundreds of simulated machines that power
// on at once and network-boot from one server the way firmware and iPXE do,
// each timed step by step. It measures a boot server under the load a rack
// (or a room) powering on puts on it, and counts what a real fleet would
// lose: offers never seen, TFTP transfers that time out, downloads cut off,
// credentials refused.
//
// Each machine, with its own MAC:
//
//	dhcp       firmware PXE DISCOVER/REQUEST (options 60, 93, 94, 97; resent
//	           after 4, 8, 16, 32 s as PXE 2.1 says), then its leased
//	           address on the client interface (addrs)
//	tftp       the first stage named in the ACK (undionly.kpxe, snponly.efi),
//	           blksize 1468 negotiated; UEFI machines first ask its tsize and
//	           abort, as EDK2 does
//	ipxe-dhcp  DISCOVER/REQUEST again as iPXE (user class "iPXE", option 175)
//	script     GET of the script URL from the ACK (/ipxe?mac=...)
//	kernel     GET of the script's kernel, checked against the real file
//	initrd     GET of its initrd, checked likewise
//	exchange   the agent's first API call over TLS (pinned CA): the boot
//	           credential from the kernel command line for the agent's own
//	           (optional: Config.API)
//	task       the agent's second call: its task
//
// Every request sets the DHCP broadcast flag: hundreds of MACs share one
// client interface, whose kernel drops frames unicast to any MAC but its
// own, so unicast OFFERs would be lost to the harness, not to the server.
// Real PXE ROMs and iPXE set the flag too.
//
// Run must run in the namespace that holds the client interface; RunIn
// starts it there in a process of its own (the calling test binary, which
// calls ClientMain from its TestMain).
package storm

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Config is one storm.
type Config struct {
	Iface    string    `json:"iface"` // the client interface in this namespace
	Machines []Machine `json:"machines"`
	Files    Files     `json:"files"`
	// API: after the initrd, the agent's first calls (exchange, task).
	API bool `json:"api"`
	// Until is the last step to run ("": all of them), e.g. StepTFTP for a
	// storm of the first stage alone.
	Until string `json:"until,omitempty"`
	// Spread powers the machines on evenly over this long (0: all at once).
	Spread time.Duration `json:"spread"`
	// FirmwareDHCP and IPXEDHCP are the waits after each send of a DHCP
	// request (default 4, 8, 16, 32 s: PXE 2.1 §2.2.1; and 1, 2, 4, 8, 16
	// s: iPXE's discovery timer starts at a second and doubles).
	FirmwareDHCP []time.Duration `json:"firmware_dhcp,omitempty"`
	IPXEDHCP     []time.Duration `json:"ipxe_dhcp,omitempty"`
	// TFTPTimeout and TFTPRetries bound each TFTP packet (default 4 s and
	// 6: EDK2 PxeBcDxe's PXEBC_MTFTP_TIMEOUT and PXEBC_MTFTP_RETRIES, as
	// remembered from its source).
	TFTPTimeout time.Duration `json:"tftp_timeout,omitempty"`
	TFTPRetries int           `json:"tftp_retries,omitempty"`
	// HTTPTimeout bounds each HTTP request, body included (default 60 s).
	HTTPTimeout time.Duration `json:"http_timeout,omitempty"`
}

// Machine is one simulated machine.
type Machine struct {
	MAC      string   `json:"mac"`
	Firmware Firmware `json:"firmware"`
}

// Files are the contents the machines must receive: each download is
// counted and checksummed (CRC-32C: cheap enough for gigabytes) against
// these, so a truncated or wrong file is a failure, not a success.
type Files struct {
	FirstStage map[string]Sum `json:"first_stage"` // by TFTP name
	Kernel     Sum            `json:"kernel"`
	Initrd     Sum            `json:"initrd"`
}

// Sum identifies a file's content.
type Sum struct {
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SumFile reads path's Sum.
func SumFile(path string) (Sum, error) {
	f, err := os.Open(path)
	if err != nil {
		return Sum{}, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return Sum{}, fmt.Errorf("reading %s: %w", path, err)
	}
	return Sum{Size: n, CRC32C: h.Sum32()}, nil
}

func (c *Config) defaults() {
	if len(c.FirmwareDHCP) == 0 {
		c.FirmwareDHCP = []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second}
	}
	if len(c.IPXEDHCP) == 0 {
		c.IPXEDHCP = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	}
	if c.TFTPTimeout <= 0 {
		c.TFTPTimeout = 4 * time.Second
	}
	if c.TFTPRetries <= 0 {
		c.TFTPRetries = 6
	}
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = 60 * time.Second
	}
}

// Run powers every machine on and returns when each has finished or
// failed, or ctx ends (machines still booting then fail with its error).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	ifi, err := net.InterfaceByName(cfg.Iface)
	if err != nil {
		return nil, fmt.Errorf("storm: client interface %s: %w", cfg.Iface, err)
	}
	dc, err := newDHCPClient(cfg.Iface)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	ad, err := newAddrs(ifi.Index)
	if err != nil {
		return nil, err
	}
	defer ad.Close()
	r := &runner{cfg: cfg, dhcp: dc, addrs: ad}
	rep := &Report{Machines: make([]MachineResult, len(cfg.Machines)), Config: cfg}
	var wg sync.WaitGroup
	start := time.Now()
	for i, m := range cfg.Machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Duration(0)
			if n := len(cfg.Machines); n > 1 {
				at = cfg.Spread * time.Duration(i) / time.Duration(n-1)
			}
			rep.Machines[i] = r.boot(ctx, m, start, at)
		}()
	}
	wg.Wait()
	rep.Wall = time.Since(start)
	return rep, nil
}
