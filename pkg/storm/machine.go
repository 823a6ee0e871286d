package storm

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/api"
)

// The steps of a machine's boot, in order.
const (
	StepDHCP     = "dhcp"
	StepTFTP     = "tftp"
	StepIPXEDHCP = "ipxe-dhcp"
	StepScript   = "script"
	StepKernel   = "kernel"
	StepInitrd   = "initrd"
	StepExchange = "exchange"
	StepTask     = "task"
)

// BootSteps are the steps up to the initrd; AgentSteps follow with API.
var (
	BootSteps  = []string{StepDHCP, StepTFTP, StepIPXEDHCP, StepScript, StepKernel, StepInitrd}
	AgentSteps = []string{StepExchange, StepTask}
)

type runner struct {
	cfg   Config
	dhcp  *dhcpClient
	addrs *addrs
}

// step is one step of a boot: it fills in what it measured beside the
// times.
type step struct {
	name string
	fn   func(context.Context, *StepResult) error
}

// boot is one machine's whole boot.
type boot struct {
	r       *runner
	m       Machine
	mac     net.HardwareAddr
	t0      time.Time // the storm's start: step times are offsets from it
	res     MachineResult
	ip      netip.Addr
	http    *http.Client
	next    string // the first stage's name, then the script URL
	tftp    netip.Addr
	agent   string // the kernel command line
	api     *api.AgentClient
	retries *retryCounter
}

func (r *runner) boot(ctx context.Context, m Machine, t0 time.Time, at time.Duration) MachineResult {
	b := &boot{r: r, m: m, t0: t0, res: MachineResult{MAC: m.MAC, Firmware: m.Firmware, PowerOn: at}}
	var err error
	if b.mac, err = net.ParseMAC(m.MAC); err != nil || len(b.mac) != 6 {
		b.res.Failed, b.res.Err = StepDHCP, fmt.Sprintf("MAC %q: expected 6 bytes", m.MAC)
		return b.res
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t0.Add(at))):
	}
	steps := []step{
		{StepDHCP, b.firmwareDHCP}, {StepTFTP, b.firstStage}, {StepIPXEDHCP, b.ipxeDHCP},
		{StepScript, b.script}, {StepKernel, b.kernel}, {StepInitrd, b.initrd},
	}
	if r.cfg.API {
		steps = append(steps, step{StepExchange, b.exchange}, step{StepTask, b.task})
	}
	defer func() {
		if b.http != nil {
			b.http.CloseIdleConnections()
		}
	}()
	for _, s := range steps {
		sr := StepResult{Step: s.name, Start: time.Since(t0)}
		err := ctx.Err()
		if err == nil {
			err = s.fn(ctx, &sr)
		}
		sr.End = time.Since(t0)
		if err != nil {
			sr.Err = err.Error()
			b.res.Failed, b.res.Err = s.name, err.Error()
		}
		b.res.Steps = append(b.res.Steps, sr)
		if err != nil || s.name == r.cfg.Until {
			break
		}
	}
	return b.res
}

func (b *boot) firmwareDHCP(ctx context.Context, sr *StepResult) error {
	res, err := b.r.dhcp.dora(ctx, b.mac, b.m.Firmware, stageFirmware, b.r.cfg.FirmwareDHCP)
	sr.Resent, sr.NAKs = res.Resent, res.NAKs
	if err != nil {
		return err
	}
	if err := b.lease(res.Ack); err != nil {
		return err
	}
	// The TFTP server: siaddr (next server), else option 66.
	b.tftp, _ = netip.AddrFromSlice(res.Ack.ServerIPAddr.To4())
	if !b.tftp.IsValid() || b.tftp.IsUnspecified() {
		if b.tftp, err = netip.ParseAddr(res.Ack.TFTPServerName()); err != nil {
			return fmt.Errorf("ACK names no TFTP server: siaddr %v, option 66 %q", res.Ack.ServerIPAddr, res.Ack.TFTPServerName())
		}
	}
	b.next = bootFile(res.Ack)
	if b.next == "" {
		b.next = bootFile(res.Offer)
	}
	return nil
}

// lease takes the ACK's address: on the client interface, and as the
// source of everything the machine sends from now on.
func (b *boot) lease(ack *dhcpv4.DHCPv4) error {
	ip, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok {
		return fmt.Errorf("ACK yiaddr %v: expected an IPv4 address", ack.YourIPAddr)
	}
	if b.ip.IsValid() && ip != b.ip {
		b.res.Moved = true // iPXE leased another address than the firmware
	}
	if err := b.r.addrs.add(ip); err != nil {
		return err
	}
	b.ip, b.res.IP = ip, ip.String()
	dial := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)), Timeout: 15 * time.Second}
	if b.http != nil {
		b.http.CloseIdleConnections()
	}
	b.http = &http.Client{Timeout: b.r.cfg.HTTPTimeout, Transport: &http.Transport{
		Proxy: nil, DialContext: dial.DialContext, DisableCompression: true, MaxIdleConnsPerHost: 1,
	}}
	return nil
}

func (b *boot) firstStage(_ context.Context, sr *StepResult) error {
	want, ok := b.r.cfg.Files.FirstStage[b.next]
	if !ok {
		return fmt.Errorf("the ACK names first stage %q, not one of the files the harness knows", b.next)
	}
	g := tftpGet{local: b.ip, server: netip.AddrPortFrom(b.tftp, 69), name: b.next, blksize: 1468,
		probe: b.m.Firmware == UEFI, windows: b.m.Firmware == UEFI, timeout: b.r.cfg.TFTPTimeout, retries: b.r.cfg.TFTPRetries}
	h := crc32.New(castagnoli)
	res, err := g.run(h)
	sr.Resent, sr.Bytes, sr.Wait = res.resent, res.bytes, res.wait
	if err != nil {
		return err
	}
	if res.blksize != g.blksize {
		sr.Note = fmt.Sprintf("blksize %d", res.blksize)
	}
	return check(b.next, Sum{Size: res.bytes, CRC32C: h.Sum32()}, want)
}

func (b *boot) ipxeDHCP(ctx context.Context, sr *StepResult) error {
	res, err := b.r.dhcp.dora(ctx, b.mac, b.m.Firmware, stageIPXE, b.r.cfg.IPXEDHCP)
	sr.Resent, sr.NAKs = res.Resent, res.NAKs
	if err != nil {
		return err
	}
	if err := b.lease(res.Ack); err != nil {
		return err
	}
	f := bootFile(res.Ack)
	if f == "" {
		f = bootFile(res.Offer)
	}
	b.next, err = expand(f, b.mac)
	return err
}

func (b *boot) script(ctx context.Context, sr *StepResult) error {
	body, err := b.get(ctx, sr, b.next, 64<<10)
	sr.Bytes = int64(len(body))
	if err != nil {
		return err
	}
	s, err := parseScript(string(body))
	if err != nil {
		return err
	}
	b.res.Kernel, b.res.Initrd, b.agent = s.Kernel, s.Initrd, s.Cmdline
	return nil
}

func (b *boot) kernel(ctx context.Context, sr *StepResult) error {
	return b.fetch(ctx, sr, b.res.Kernel, b.r.cfg.Files.Kernel)
}

func (b *boot) initrd(ctx context.Context, sr *StepResult) error {
	return b.fetch(ctx, sr, b.res.Initrd, b.r.cfg.Files.Initrd)
}

// get reads a small answer (the script) whole.
func (b *boot) get(ctx context.Context, sr *StepResult, url string, limit int64) ([]byte, error) {
	resp, err := b.do(ctx, sr, url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return body, fmt.Errorf("GET %s: reading the body: %w", url, err)
	}
	return body, nil
}

// fetch downloads url as iPXE does (the whole body, one request) and
// checks it against want.
func (b *boot) fetch(ctx context.Context, sr *StepResult, url string, want Sum) error {
	resp, err := b.do(ctx, sr, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := crc32.New(castagnoli)
	n, err := io.CopyBuffer(h, resp.Body, make([]byte, 256<<10))
	sr.Bytes = n
	if err != nil {
		return fmt.Errorf("GET %s: the body broke off after %d bytes: %w", url, n, err)
	}
	return check(url, Sum{Size: n, CRC32C: h.Sum32()}, want)
}

// do sends a GET from the machine's address; anything but 200 is an error
// (iPXE has no retry: a failed download is a failed boot).
func (b *boot) do(ctx context.Context, sr *StepResult, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("User-Agent", "iPXE/1.0.0+ (storm)")
	start := time.Now()
	resp, err := b.http.Do(req)
	sr.Wait = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, clip(string(msg)))
	}
	return resp, nil
}

// check compares what arrived with the file it should be.
func check(what string, got, want Sum) error {
	if got != want {
		return fmt.Errorf("%s arrived as %d bytes with CRC-32C %08x, expected %d bytes with %08x", what, got.Size, got.CRC32C, want.Size, want.CRC32C)
	}
	return nil
}
