//go:build integration

package tftp

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestIntegrationTFTPFlood: 64 read requests that are never acknowledged,
// from one address or spread over 16, then a real client (tftp-hpa, curl)
// from another address of the client namespace. Before the per-client limit
// and FirstACKWait, the flood held all 64 slots for 12-17 s and the client
// got "server busy" at once (tftp-hpa and curl give up on it). Now it has
// its file at once (one address: the flood holds MaxPerClient slots) or
// when the flood's slots come free at FirstACKWait (2 s), its request
// waiting unanswered until then.
func TestIntegrationTFTPFlood(t *testing.T) {
	netnstest.Need(t, "tftp", "curl")
	const within = 2*time.Second + 2*time.Second // FirstACKWait and a margin for a loaded machine
	clients := map[string]func(dst string) []string{
		"tftp-hpa": func(dst string) []string {
			return []string{"tftp", "-m", "binary", srvIP, "-c", "get", "undionly.kpxe", dst}
		},
		"curl": func(dst string) []string {
			return []string{"curl", "-sS", "--tftp-blksize", "1468", "-o", dst, "tftp://" + srvIP + "/undionly.kpxe"}
		},
	}
	for _, addrs := range []int{1, 16} {
		for name, cmd := range clients {
			t.Run(fmt.Sprintf("64 from %d address(es) then %s", addrs, name), func(t *testing.T) {
				srv, cli := twoNS(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var sources []string
				for i := range addrs {
					ip := fmt.Sprintf("10.78.0.%d", 10+i)
					if err := cli.IP(ctx, "addr", "add", ip+"/24", "dev", "eth0"); err != nil {
						t.Fatal(err)
					}
					sources = append(sources, ip)
				}
				dir := t.TempDir()
				want := randomFile(t, filepath.Join(dir, "undionly.kpxe"), 100_001)
				randomFile(t, filepath.Join(dir, "big.bin"), 1<<20)
				startIngot(t, srv, dir, srvIP+":69", "INGOT_TFTP_HELPER_MAX_TRANSFERS=0") // the default, 64
				floodFrom(t, cli, sources, 64)
				time.Sleep(200 * time.Millisecond) // the server takes the flood in
				dst := filepath.Join(t.TempDir(), "got")
				args := cmd(dst)
				start := time.Now()
				out, err := cli.Run(ctx, args[0], args[1:]...)
				d := time.Since(start)
				if err != nil {
					t.Fatalf("after %v: %v: %s", d.Round(time.Millisecond), err, out)
				}
				if got := fileSHA(t, dst); got != want {
					t.Fatalf("undionly.kpxe arrived with sha256 %s, want %s (%s said %q)", got, want, name, out)
				}
				t.Logf("%s had its file %v after the flood", name, d.Round(time.Millisecond))
				if d > within {
					t.Errorf("%s took %v, want at most %v", name, d.Round(time.Millisecond), within)
				}
			})
		}
	}
}

// floodFrom sends n read requests to the server from the sources, in turn,
// each from its own socket in the client namespace. The sockets stay open
// and never read until the test ends, so no ICMP tells the server to stop:
// it sees what it would see from forged addresses.
func floodFrom(t *testing.T, cli *netns.NS, sources []string, n int) {
	t.Helper()
	var conns []*net.UDPConn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	srv := &net.UDPAddr{IP: net.ParseIP(srvIP), Port: 69}
	err := cli.Do(func() error {
		for i := range n {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(sources[i%len(sources)])})
			if err != nil {
				return err
			}
			conns = append(conns, c)
			req := rrq("big.bin")
			if i%2 == 1 {
				req = rrq("big.bin", "tsize", "0", "blksize", "1468")
			}
			if _, err := c.WriteToUDP(req, srv); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("flooding from the client namespace: %v", err)
	}
}
