//go:build integration

package serve

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// BenchmarkAPIFleetScale measures the operator API at fleet scale from
// outside, over TLS, against a real `ingot serve` process (DHCP and TFTP
// off, on loopback) with a plain net/http client: 16 clients enrol 5,000
// machines (each enrolment durable with its event before the answer),
// then the whole fleet is listed as the CLI lists it (pages of 500), five
// times; the server's peak RSS is read from /proc. It reports enrolments
// a second, the slowest and median listing, and the peak RSS.
//
//	make build && INGOT_BIN=$PWD/bin/ingot go test -tags integration -run '^$' -bench APIFleetScale -benchtime 1x -v ./pkg/serve/
//
// For a CPU profile of the server during the run, set INGOT_BENCH_PPROF to a
// file: serve is started with INGOT_CPUPROFILE pointing at it.
func BenchmarkAPIFleetScale(b *testing.B) {
	const (
		machines = 5000
		clients  = 16
		page     = 500
	)
	for range b.N {
		srv := startBenchServe(b)
		start := time.Now()
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= machines {
						return
					}
					m := machine.Machine{Name: fmt.Sprintf("gpu-%05d", i), Rack: fmt.Sprintf("r%02d", i/50), Index: int(i%50) + 1,
						MACs: []string{fmt.Sprintf("52:54:%02x:%02x:%02x:01", i>>16&0xff, i>>8&0xff, i&0xff)}}
					if code, body := srv.do("POST", "/api/v1/machines", m); code != http.StatusCreated {
						failed.Add(1)
						b.Errorf("enrolling %s: %d %s", m.Name, code, body)
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		var lists []time.Duration
		var size int
		for range 5 {
			t0 := time.Now()
			n, bytes := srv.listAll(b, page)
			lists = append(lists, time.Since(t0))
			if n != machines {
				b.Fatalf("listed %d machines, want %d", n, machines)
			}
			size = bytes
		}
		slices.Sort(lists)
		rss := srv.peakRSS(b)
		srv.stop(b)
		rate := float64(machines) / took.Seconds()
		b.ReportMetric(rate, "enrolments/s")
		b.ReportMetric(float64(lists[2].Microseconds())/1000, "list-median-ms")
		b.ReportMetric(float64(lists[4].Microseconds())/1000, "list-slowest-ms")
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
		b.Logf("%d machines enrolled by %d clients in %s: %.0f/s, %d failed; list of %d (%d bytes in pages of %d): median %s, slowest %s; serve's peak RSS %.1f MiB",
			machines, clients, took.Round(time.Millisecond), rate, failed.Load(), machines, size, page, lists[2].Round(100*time.Microsecond),
			lists[4].Round(100*time.Microsecond), float64(rss)/(1<<20))
	}
}

// benchServe is a serve process and a client of its API.
type benchServe struct {
	cmd   *exec.Cmd
	url   string
	token string
	http  *http.Client
	log   *syncBuf
}

func startBenchServe(b *testing.B) *benchServe {
	b.Helper()
	data := b.TempDir()
	api := freeAddr(b)
	cmd := exec.Command(ingotBin(b), "serve", "--dhcp", "off", "--tftp=false", "--ra=false", "--http-addr", freeAddr(b), "--api-addr", api,
		"--data", data, "--log-level", "warn", "--telemetry-interval", "0", "--inventory-refresh", "0", "--public-rate", "0")
	log := &syncBuf{}
	cmd.Stdout, cmd.Stderr = log, log
	if p := os.Getenv("INGOT_BENCH_PPROF"); p != "" {
		cmd.Env = append(os.Environ(), "INGOT_CPUPROFILE="+p)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &benchServe{cmd: cmd, url: "https://" + api, log: log}
	b.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		tok, err1 := os.ReadFile(filepath.Join(data, "admin.token"))
		ca, err2 := os.ReadFile(filepath.Join(data, "tls", "ca.pem"))
		if err1 == nil && err2 == nil && len(tok) > 0 {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(ca)
			s.token = strings.TrimSpace(string(tok))
			s.http = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 32}}
			if code, _ := s.do("GET", "/api/v1/version", nil); code == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("ingot serve did not come up:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *benchServe) do(method, path string, in any) (int, []byte) {
	var body io.Reader
	if in != nil {
		raw, _ := json.Marshal(in)
		body = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, s.url+path, body)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// listAll pages through every machine as the CLI does; it returns how many
// and the bytes received.
func (s *benchServe) listAll(b *testing.B, page int) (n, size int) {
	after := ""
	for {
		code, body := s.do("GET", "/api/v1/machines?limit="+strconv.Itoa(page)+"&after="+after, nil)
		if code != 200 {
			b.Fatalf("listing machines: %d %s", code, body)
		}
		var ms []machine.Machine
		if err := json.Unmarshal(body, &ms); err != nil {
			b.Fatal(err)
		}
		n, size = n+len(ms), size+len(body)
		if len(ms) < page {
			return n, size
		}
		after = ms[len(ms)-1].Name
	}
}

// peakRSS is serve's VmHWM.
func (s *benchServe) peakRSS(b *testing.B) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

func (s *benchServe) stop(b *testing.B) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		b.Errorf("serve did not stop within 20 s of SIGTERM:\n%s", s.log.String())
	}
}

// freeAddr is a free loopback TCP address.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
