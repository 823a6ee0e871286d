//go:build integration

package storm_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/storm"
)

// TestMain runs the storm's machines when RunIn starts this binary again
// inside the client namespace.
func TestMain(m *testing.M) {
	storm.ClientMain()
	os.Exit(m.Run())
}

// TestIntegrationBootStorm powers 200 simulated machines on at once against
// the real `ingot serve`, each through firmware DHCP, TFTP, iPXE's DHCP,
// its script, the agent's kernel and initrd (the files `make lab` builds)
// and the agent's first two API calls over TLS, and requires every one of
// them to get through every step within 90 s, with the server's own
// counters agreeing.
func TestIntegrationBootStorm(t *testing.T) {
	n := envInt("INGOT_STORM_MACHINES", 200) // fewer for a quick look
	env := newStormEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv, cli := env.net(t)
	g := env.startIngot(t, ctx, srv)
	ms := storm.Machines(n)
	start := time.Now()
	if err := g.Prepare(ctx, ms); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d machines enrolled, reimage jobs started, all provisioning in %v", n, time.Since(start).Round(time.Millisecond))
	before, err := g.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := storm.RunIn(ctx, cli, storm.Config{Iface: storm.ClientIface, Machines: ms, Files: env.files, API: true},
		t.TempDir(), 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sum := rep.Summarize(append(storm.BootSteps, storm.AgentSteps...))
	t.Logf("storm of %d machines in %v (load generator CPU %v):\n%s", n, rep.Wall.Round(time.Millisecond), rep.ClientCPU.Round(time.Millisecond), sum)
	if err := sum.Check(); err != nil {
		t.Error(err)
	}
	if rep.Wall > 90*time.Second {
		t.Errorf("the storm took %v, goal within 90 s", rep.Wall)
	}
	after, err := g.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The server's counters agree with the machines': one TFTP transfer
	// each, one aborted tsize probe per UEFI machine (and one more for each
	// request a machine sent again while its transfer was starting: the
	// machine refuses the second transfer), one script each.
	resent := 0
	for _, st := range sum.Steps {
		if st.Step == storm.StepTFTP {
			resent = st.Resent
		}
	}
	delta := func(metric string) int { return counter(after, metric) - counter(before, metric) }
	if got := delta(`ingot_tftp_transfers_total{result="ok"}`); got != n {
		t.Errorf("ingot counted %d TFTP transfers ok during the storm, want %d (one per machine)", got, n)
	}
	if got := delta(`ingot_tftp_transfers_total{result="aborted"}`); got < n/2 || got > n/2+resent {
		t.Errorf("ingot counted %d TFTP transfers aborted, want %d (a probe per UEFI machine) to %d (and one per TFTP request resent)", got, n/2, n/2+resent)
	}
	if got := delta(`ingot_http_requests_total{code="200",route="ipxe"}`); got != n {
		t.Errorf("ingot answered /ipxe %d times with 200 during the storm, want %d (one per machine)", got, n)
	}
	if t.Failed() {
		t.Logf("serve.log (tail):\n%s", g.Tail("serve", 4000))
	}
}

// counter reads one sample of a Prometheus text exposition (0: absent).
func counter(text, metric string) int {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + ` ([0-9.e+]+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return int(v)
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
