//go:build integration

package vbmc

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startNginx serves root's index.json files the way a mockup is read
// (GET /redfish/v1/X -> X/index.json) on 127.0.0.1 and returns its base URL.
func startNginx(b *testing.B, root string) string {
	b.Helper()
	nginx := needProgram(b, "nginx")
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := fmt.Sprintf(`worker_processes 2;
daemon off;
error_log %[1]s/error.log;
pid %[1]s/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  default_type application/json;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
    listen %[2]s;
    root %[3]s;
    location / { try_files $uri/index.json =404; }
  }
}
`, dir, addr, root)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", cf)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/redfish/v1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("nginx did not answer GET /redfish/v1 on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// load GETs every path round-robin from conc workers, n requests in all,
// and returns requests per second; any non-200 fails the benchmark.
func load(b *testing.B, base string, paths []string, n, conc int) float64 {
	b.Helper()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer hc.CloseIdleConnections()
	var next atomic.Int64
	var bad atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				u := base + paths[int(i)%len(paths)]
				resp, err := hc.Get(u)
				if err != nil {
					bad.Store(err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad.Store(fmt.Sprintf("GET %s: %d", u, resp.StatusCode))
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := bad.Load(); v != nil {
		b.Fatal(v)
	}
	return float64(n) / time.Since(start).Seconds()
}

// The virtual BMC serves a whole mockup about as fast as nginx serves the
// same files (it keeps them in memory, nginx reads them from disk). The
// ratio vbmc/nginx is requests per second, higher is better.
func BenchmarkIntegrationServeVsNginx(b *testing.B) {
	const requests, conc = 20000, 8
	root := filepath.Join(mockupDir(b), "dmtf-public-tower")
	bmc, err := New(Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	var paths []string
	for p := range bmc.tree.docs {
		paths = append(paths, (&url.URL{Path: p}).EscapedPath())
	}
	srv := httptest.NewServer(bmc)
	defer srv.Close()
	ngx := startNginx(b, root)
	for range b.N {
		load(b, ngx, paths, 2000, conc) // warm both
		load(b, srv.URL, paths, 2000, conc)
		n := load(b, ngx, paths, requests, conc)
		v := load(b, srv.URL, paths, requests, conc)
		b.ReportMetric(v, "vbmc_req/s")
		b.ReportMetric(n, "nginx_req/s")
		b.ReportMetric(v/n, "vbmc/nginx")
	}
}
