package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

func TestJudge(t *testing.T) {
	checks := []recipe.Check{
		{Name: "memory-size"}, {Name: "nic-link"}, {Name: "disk-health", Optional: true},
		{Name: "gpu-burn"}, {Name: "nccl-allreduce", Optional: true},
	}
	waived := &machine.Machine{Name: "n1", Waivers: []machine.Waiver{{Check: "nic-link", Actor: "operator:alice", Reason: "INC-42 switch port"}}}
	ok := func(n string) CheckResult { return CheckResult{Name: n, OK: true} }
	bad := func(n, d string) CheckResult { return CheckResult{Name: n, Detail: d} }
	skip := func(n, d string) CheckResult { return CheckResult{Name: n, Skipped: true, Detail: d} }
	cases := map[string]struct {
		stage   recipe.Stage
		results []CheckResult
		m       *machine.Machine
		failed  []string // substrings, one per failure, in order
		waived  int
	}{
		"all agent checks pass":        {recipe.StageAgent, []CheckResult{ok("memory-size"), ok("nic-link"), ok("disk-health")}, nil, nil, 0},
		"optional may fail":            {recipe.StageAgent, []CheckResult{ok("memory-size"), ok("nic-link"), bad("disk-health", "sda: FAILED")}, nil, nil, 0},
		"optional may be missing":      {recipe.StageAgent, []CheckResult{ok("memory-size"), ok("nic-link")}, nil, nil, 0},
		"required missing fails":       {recipe.StageAgent, []CheckResult{ok("memory-size")}, nil, []string{"nic-link: did not run (no result"}, 0},
		"skipped is not ok":            {recipe.StageAgent, []CheckResult{ok("memory-size"), skip("nic-link", "ethtool not found")}, nil, []string{"nic-link: did not run: ethtool not found"}, 0},
		"failure fails":                {recipe.StageAgent, []CheckResult{bad("memory-size", "found 256GiB"), ok("nic-link")}, nil, []string{"memory-size: found 256GiB"}, 0},
		"waiver lets one check past":   {recipe.StageAgent, []CheckResult{ok("memory-size"), bad("nic-link", "1 of 8 up")}, waived, nil, 1},
		"waiver is for its check only": {recipe.StageAgent, []CheckResult{bad("memory-size", "low"), bad("nic-link", "down")}, waived, []string{"memory-size: low"}, 1},
		"waiver never covers not run":  {recipe.StageAgent, []CheckResult{ok("memory-size"), skip("nic-link", "no tool")}, waived, []string{"nic-link: did not run"}, 0},
		"burn-in judged apart":         {recipe.StageBurnIn, []CheckResult{ok("gpu-burn")}, nil, nil, 0},
		"burn-in required missing":     {recipe.StageBurnIn, nil, nil, []string{"gpu-burn: did not run"}, 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			v := judge(checks, c.stage, c.results, c.m)
			if len(v.Failed) != len(c.failed) {
				t.Fatalf("failed %q, want %d failures like %q", v.Failed, len(c.failed), c.failed)
			}
			for i, f := range c.failed {
				if !strings.Contains(v.Failed[i], f) {
					t.Errorf("failure %d %q, want it to say %q", i, v.Failed[i], f)
				}
			}
			if len(v.Waived) != c.waived {
				t.Errorf("waived %q, want %d", v.Waived, c.waived)
			}
			for _, r := range v.Results {
				if r.Skipped && r.OK {
					t.Errorf("%s is both skipped and ok", r.Name)
				}
			}
		})
	}
}

func TestInstalledMismatches(t *testing.T) {
	r := &recipe.Recipe{Name: "gpu", Network: recipe.Network{Hostname: "h100-{rack}-{index:02d}"},
		OS: recipe.OS{FirstBoot: &recipe.FirstBoot{CloudInit: "#cloud-config\n"}}}
	m := &machine.Machine{Name: "n1", Rack: "r12", Index: 3}
	cases := map[string]struct {
		m    *machine.Machine
		sw   machine.Software
		want []string
	}{
		"as the recipe says":   {m, machine.Software{Hostname: "h100-r12-03", CloudInit: "done"}, nil},
		"hostname not set":     {m, machine.Software{Hostname: "localhost", CloudInit: "done"}, []string{`hostname is "localhost", the recipe's network.hostname gives "h100-r12-03"`}},
		"cloud-init failed":    {m, machine.Software{Hostname: "h100-r12-03", CloudInit: "error: runparts: 1 failures"}, []string{"first_boot.cloud_init did not complete: error: runparts"}},
		"cloud-init never ran": {m, machine.Software{Hostname: "h100-r12-03"}, []string{"no cloud-init result was reported"}},
		"machine without rack": {&machine.Machine{Name: "n2", Index: 1}, machine.Software{CloudInit: "done"}, []string{"needs {rack}"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := installedMismatches(r, c.m, c.sw)
			if len(got) != len(c.want) {
				t.Fatalf("%q, want %d mismatches like %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("%q, want it to say %q", got[i], w)
				}
			}
		})
	}
}

func TestLonePairs(t *testing.T) {
	fabric := func(optional bool) *recipe.Recipe {
		return &recipe.Recipe{Name: "gpu", Acceptance: recipe.Acceptance{Checks: []recipe.Check{{Name: "gpu-count"}, {Name: "iperf3", Optional: optional}}}}
	}
	cases := map[string]struct {
		r     *recipe.Recipe
		waves [][]string
		want  string
	}{
		"canary of one, required iperf3": {fabric(false), [][]string{{"a"}, {"b", "c"}}, "wave 1 of 2 has one machine (a), but recipe gpu requires iperf3"},
		"last wave of one":               {fabric(false), [][]string{{"a", "b"}, {"c"}}, "wave 2 of 2 has one machine (c)"},
		"waves of two":                   {fabric(false), [][]string{{"a", "b"}, {"c", "d", "e"}}, ""},
		"optional iperf3":                {fabric(true), [][]string{{"a"}, {"b"}}, ""},
		"no fabric check":                {&recipe.Recipe{Name: "gpu"}, [][]string{{"a"}}, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := lonePairs(c.r, c.waves)
			if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Errorf("lonePairs = %v, want %q", err, c.want)
			}
		})
	}
}

func TestPair(t *testing.T) {
	ctx := context.Background()
	e, s := poolEngine(t, "")
	// a, b, c outside a rollout; w1 in wave 1 of a rollout, w2 and w3 in
	// its wave 2: nodes pair only within their wave.
	waves := map[string]string{"w1": "r-1/1", "w2": "r-1/2", "w3": "r-1/2"}
	for _, id := range []string{"a", "b", "c", "w1", "w2", "w3"} {
		if err := s.CreateMachine(ctx, &machine.Machine{ID: id, Name: "n-" + id, State: machine.StateVerifying}); err != nil {
			t.Fatal(err)
		}
		spec, _ := json.Marshal(ReimageSpec{Machine: id, Recipe: "gpu", Wave: waves[id]})
		if err := s.CreateJob(ctx, &store.Job{ID: "j-" + id, Kind: "reimage", Machines: []string{id}, State: store.JobRunning,
			Step: StepFirstBoot, Spec: spec, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		machine, addr string
		want          Peer
	}{
		{"a", "10.0.0.1", Peer{Role: "wait"}},
		{"a", "10.0.0.1", Peer{Role: "wait"}}, // a retry
		{"b", "10.0.0.2", Peer{Role: "client", Address: "10.0.0.1"}},
		{"a", "10.0.0.1", Peer{Role: "server", Address: "10.0.0.2"}},
		{"b", "10.0.0.2", Peer{Role: "client", Address: "10.0.0.1"}}, // idempotent
		{"c", "10.0.0.3", Peer{Role: "wait"}},                        // a and b are taken
		{"w1", "10.0.1.1", Peer{Role: "wait"}},                       // c is not of its wave
		{"w2", "10.0.1.2", Peer{Role: "wait"}},                       // nor is w1 of w2's
		{"w3", "10.0.1.3", Peer{Role: "client", Address: "10.0.1.2"}},
	}
	for i, st := range steps {
		got, err := e.Pair(ctx, st.machine, "iperf3", st.addr)
		if err != nil || got != st.want {
			t.Errorf("step %d: Pair(%s) = %+v, %v; want %+v", i, st.machine, got, err, st.want)
		}
	}
	if _, err := s.UpdateJob(ctx, "j-c", func(j *store.Job) error { j.Step = StepImage; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pair(ctx, "c", "iperf3", "10.0.0.3"); err == nil {
		t.Error("a machine not in burn-in was paired")
	}
}

func TestRolloutValues(t *testing.T) {
	e, _ := poolEngine(t, "off")
	for name, c := range map[string]struct {
		sp   RolloutSpec
		want string
	}{
		"negative canary":   {RolloutSpec{Recipe: "gpu", Batch: 2, Canary: -1}, "canary -1"},
		"negative per rack": {RolloutSpec{Recipe: "gpu", Batch: 2, PerRack: -2}, "per_rack -2"},
		"no batch":          {RolloutSpec{Recipe: "gpu"}, "batch 0"},
		"negative failures": {RolloutSpec{Recipe: "gpu", Batch: 2, MaxFailures: -1}, "max_failures -1"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := e.StartRollout(context.Background(), c.sp, "test"); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("StartRollout = %v, want an error saying %q", err, c.want)
			}
		})
	}
}
