package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns"
)

// clientEnv names the files of a storm run in a process of its own:
// CONFIG.json,REPORT.json.
const clientEnv = "INGOT_STORM_CLIENT"

// RunIn runs the storm inside ns, in a process of its own: this program
// started again there, whose TestMain calls ClientMain first. The machines'
// sockets then all belong to the namespace without any thread juggling,
// and the load generator's CPU is its own (Report.ClientCPU). dir holds the
// config and report files; limit bounds the whole storm.
func RunIn(ctx context.Context, ns *netns.NS, cfg Config, dir string, limit time.Duration) (*Report, error) {
	in, out := filepath.Join(dir, "storm-config.json"), filepath.Join(dir, "storm-report.json")
	b, err := json.Marshal(runSpec{Config: cfg, Limit: limit})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		return nil, err
	}
	cmd := ns.Command(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), clientEnv+"="+in+","+out)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("storm client in %s: %w: %s", ns.Name, err, clip(stderr.String()))
	}
	var rep Report
	b, err = os.ReadFile(out)
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		return nil, fmt.Errorf("storm client's report %s: %w", out, err)
	}
	rep.ClientCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return &rep, nil
}

type runSpec struct {
	Config Config        `json:"config"`
	Limit  time.Duration `json:"limit"`
}

// ClientMain runs the storm when RunIn started this process, and exits;
// otherwise it returns at once. Call it first in TestMain.
func ClientMain() {
	v := os.Getenv(clientEnv)
	if v == "" {
		return
	}
	if err := runClient(v); err != nil {
		fmt.Fprintln(os.Stderr, "storm client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runClient(files string) error {
	in, out, ok := bytes.Cut([]byte(files), []byte(","))
	if !ok {
		return fmt.Errorf("%s=%q: expected CONFIG,REPORT", clientEnv, files)
	}
	b, err := os.ReadFile(string(in))
	if err != nil {
		return err
	}
	var spec runSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("storm config %s: %w", in, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Limit)
	defer cancel()
	rep, err := Run(ctx, spec.Config)
	if err != nil {
		return err
	}
	if b, err = json.Marshal(rep); err != nil {
		return err
	}
	return os.WriteFile(string(out), b, 0o644)
}

// spawn starts bin in ns, its output in dir/name.log; ns.Close kills it.
func spawn(ns *netns.NS, dir, name, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := ns.Command(context.Background(), bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := ns.Start(cmd); err != nil {
		return nil, err
	}
	return cmd, nil
}
