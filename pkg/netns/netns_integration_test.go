//go:build integration

package netns_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// A server listening from inside Do is reachable over a veth from a second
// namespace, and not from the host.
func TestIntegrationVethAndDo(t *testing.T) {
	ctx := context.Background()
	srv := netnstest.New(t, "ingot-t-srv")
	cli := netnstest.New(t, "ingot-t-cli")
	if err := netns.Veth(ctx, srv, "v0", "10.231.0.1/24", cli, "v1", "10.231.0.2/24"); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := srv.Do(func() (err error) {
		ln, err = net.Listen("tcp", "10.231.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello from the namespace\n"))
			c.Close()
		}
	}()
	out, err := cli.Run(ctx, "busybox", "nc", "10.231.0.1", portOf(ln))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "hello from the namespace") {
		t.Fatalf("got %q", out)
	}
	// The host has no route into the namespace's network.
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatalf("host reached %s: the namespace is not isolated", ln.Addr())
	}
}

func portOf(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}
