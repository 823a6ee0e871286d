//go:build integration

package httpboot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// serveIn serves h on addr inside ns (the listener, and so every accepted
// connection, belongs to the namespace).
func serveIn(t testing.TB, ns *netns.NS, addr string, h http.Handler) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func TestIntegrationCurlScriptAndRange(t *testing.T) {
	netnstest.Need(t, "curl")
	ns := netnstest.New(t, "httpb")
	f, mux := newMux(t, "")
	serveIn(t, ns, "127.0.0.1:8080", mux)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	body, err := ns.Run(ctx, "curl", "-sSf", "http://127.0.0.1:8080/ipxe?mac=52:54:00:00:00:01&arch=bios")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.NewReplacer(f.kernel.SHA256, "KERNEL_SHA", f.initrd.SHA256, "INITRD_SHA").Replace(string(body))
	golden(t, "known-bios.ipxe", []byte(got))

	url := "http://127.0.0.1:8080/artifacts/sha256/" + f.bigRef.SHA256
	part, err := ns.Run(ctx, "curl", "-sSf", "-r", "0-99", url)
	if err != nil || !bytes.Equal(part, f.big[:100]) {
		t.Fatalf("curl -r 0-99: %v, %q", err, part)
	}
	part, err = ns.Run(ctx, "curl", "-sSf", "-r", "500000-500009", "http://127.0.0.1:8080/artifacts/big.img")
	if err != nil || !bytes.Equal(part, f.big[500000:500010]) {
		t.Fatalf("curl -r 500000-500009 by name: %v, %q", err, part)
	}
	hdr, err := ns.Run(ctx, "curl", "-sSf", "-I", url)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`etag: "` + f.bigRef.SHA256 + `"`, "content-length: " + strconv.Itoa(len(f.big)), "accept-ranges: bytes"} {
		if !strings.Contains(strings.ToLower(string(hdr)), want) {
			t.Errorf("HEAD lacks %q:\n%s", want, hdr)
		}
	}
	code, _ := ns.Run(ctx, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", `If-None-Match: "`+f.bigRef.SHA256+`"`, url)
	if string(code) != "304" {
		t.Errorf("If-None-Match: status %s, want 304", code)
	}
}

// BenchmarkIntegrationHTTPArtifact: one large artifact fetched by 50
// concurrent curl clients in a client namespace over veth, from ingot's
// artifact handler and from nginx (sendfile on) serving the same file.
// The issue asks for 2 GB; 512 MiB is what fits a 2-core
// box, and 256 MiB by default so the run stays under 2 minutes here (50 x 256
// MiB per server at ~300 MB/s); set INGOT_BENCH_HTTP_SIZE (bytes, or MiB/GiB).
// Reports aggregate MB/s of each and ingot/nginx (goal >= 0.95).
func BenchmarkIntegrationHTTPArtifact(b *testing.B) {
	netnstest.Need(b, "curl", "nginx")
	size := benchSize(b)
	clients := 50
	srvNS, cli := netnstest.New(b, "httpbs"), netnstest.New(b, "httpbc")
	if err := netns.Veth(context.Background(), srvNS, "eth0", "10.79.0.1/24", cli, "eth0", "10.79.0.2/24"); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	arts, err := artifact.Open(filepath.Join(dir, "artifacts"))
	if err != nil {
		b.Fatal(err)
	}
	ref, err := arts.Put(context.Background(), &zeroReader{n: size})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{ServerURL: "http://10.79.0.1:8080", Machines: fakeMachines{},
		Recipes: func(name string) (*recipe.Recipe, error) { return nil, fmt.Errorf("no recipe %s", name) },
		Tokens:  fixedToken("x"), Artifacts: arts})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	serveIn(b, srvNS, "10.79.0.1:8080", mux)
	startNginx(b, srvNS, dir, "10.79.0.1:8081")

	path := "/artifacts/sha256/" + ref.SHA256
	run := func(port int) time.Duration {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		start := time.Now()
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := cli.Run(context.Background(), "curl", "-sSf", "-o", "/dev/null", "-w", "%{size_download}",
					fmt.Sprintf("http://10.79.0.1:%d%s", port, path))
				if err == nil && string(out) != strconv.FormatInt(size, 10) {
					err = fmt.Errorf("downloaded %s bytes, want %d", out, size)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		d := time.Since(start)
		close(errs)
		for err := range errs {
			b.Fatalf("port %d: %v", port, err)
		}
		return d
	}
	var ing, ngx time.Duration
	for i := 0; i < b.N; i++ {
		ngx += run(8081)
		ing += run(8080)
	}
	mb := float64(size) * float64(clients) * float64(b.N) / 1e6
	b.ReportMetric(mb/ing.Seconds(), "ingot-MB/s")
	b.ReportMetric(mb/ngx.Seconds(), "nginx-MB/s")
	b.ReportMetric(ngx.Seconds()/ing.Seconds(), "ingot/nginx")
}

func benchSize(b *testing.B) int64 {
	v := os.Getenv("INGOT_BENCH_HTTP_SIZE")
	if v == "" {
		return 256 << 20
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "GiB"):
		mult, v = 1<<30, strings.TrimSuffix(v, "GiB")
	case strings.HasSuffix(v, "MiB"):
		mult, v = 1<<20, strings.TrimSuffix(v, "MiB")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("INGOT_BENCH_HTTP_SIZE=%q: expected bytes, or a number with MiB/GiB", os.Getenv("INGOT_BENCH_HTTP_SIZE"))
	}
	return n * mult
}

// startNginx serves dir (the artifact store layout) with nginx on addr.
func startNginx(b *testing.B, ns *netns.NS, dir, addr string) {
	b.Helper()
	nd := b.TempDir()
	conf := filepath.Join(nd, "nginx.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`user root;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
    listen %[2]s;
    location /artifacts/ { alias %[3]s/artifacts/; }
  }
}
`, nd, addr, dir)), 0o644)
	cmd := ns.Command(context.Background(), "nginx", "-c", conf, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	if err := ns.Start(cmd); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Signal(syscall.SIGQUIT); cmd.Wait() })
	for i := 0; i < 50; i++ {
		if _, err := ns.Run(context.Background(), "curl", "-s", "-o", "/dev/null", "http://"+addr+"/"); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("nginx did not start on %s (see %s/error.log)", addr, nd)
}

// zeroReader yields n zero bytes (fast to create, sendfile does not care).
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > z.n {
		p = p[:z.n]
	}
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}
