package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent"
	"github.com/ingot-dev/ingot/pkg/agent/firstboot"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin"
)

// runFirstboot implements `ingot-agent firstboot`, run by the installed OS's
// first-boot unit: it reports the kernel, OS release and driver versions,
// presenting the job's first-boot secret. The server and secret come from
// the flags, else from the kernel command line (the agent passes
// ingot.server/ingot.firstboot to a kexec'd kernel), else from the env file
// the agent wrote into the installed system (INGOT_SERVER=,
// INGOT_FIRSTBOOT=), which is deleted once the report was accepted.
func runFirstboot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ingot-agent firstboot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "ingot server URL (its API)")
	caFlag := fs.String("ca", "", "fingerprint (sha256:HEX) of the certificate the https API must present")
	secret := fs.String("secret", "", "the job's first-boot secret")
	cmdline := fs.String("cmdline", "/proc/cmdline", "kernel command line file to read ingot.server and ingot.firstboot from")
	envFile := fs.String("env", api.FirstBootEnv, "file with INGOT_SERVER= and INGOT_FIRSTBOOT= lines, written by the agent")
	root := fs.String("root", "/", "root of /proc, /sys and /etc to read")
	planFile := fs.String("plan", api.BurnInPlanPath, "burn-in plan the agent wrote (JSON); absent: no burn-in")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var cfg agent.Config
	if b, err := os.ReadFile(*cmdline); err == nil {
		cfg, _ = agent.ParseCmdline(string(b))
	}
	env := map[string]string{}
	if b, err := os.ReadFile(*envFile); err == nil {
		env = parseEnv(b)
	}
	pick := func(vals ...string) string {
		for _, v := range vals {
			if v != "" {
				return v
			}
		}
		return ""
	}
	url := pick(*server, cfg.API, env["INGOT_API"], cfg.Server, env["INGOT_SERVER"])
	sec := pick(*secret, cfg.FirstBoot, env["INGOT_FIRSTBOOT"])
	// An https API is trusted only through the pinned certificate the agent
	// was given (ingot.ca= or INGOT_CA=), never the system's roots.
	ca := pick(*caFlag, cfg.CA, env["INGOT_CA"])
	switch {
	case url == "":
		fmt.Fprintf(stdout, "ingot-agent: firstboot: no server: expected ingot.server= on the kernel command line, INGOT_SERVER= in %s, or --server\n", *envFile)
		return 1
	case sec == "":
		fmt.Fprintf(stdout, "ingot-agent: firstboot: no first-boot secret: expected ingot.firstboot= on the kernel command line or INGOT_FIRSTBOOT= in %s "+
			"(the agent writes it during the image step; ingot refuses a report without it)\n", *envFile)
		return 1
	}
	sw, err := firstboot.Collect(*root)
	if err != nil {
		fmt.Fprintf(stdout, "ingot-agent: firstboot: %v\n", err)
		return 1
	}
	report := api.FirstBoot{Software: sw}
	if strings.HasPrefix(url, "https://") && ca == "" {
		fmt.Fprintf(stdout, "ingot-agent: firstboot: %s is https but no certificate to pin: expected ingot.ca= or INGOT_CA= in %s, or --ca\n", url, *envFile)
		return 1
	}
	client := api.NewAgentClient(url, sec, nil)
	client.CA = ca
	if b, err := os.ReadFile(*planFile); err == nil {
		var plan burnin.Plan
		if err := json.Unmarshal(b, &plan); err != nil {
			fmt.Fprintf(stdout, "ingot-agent: firstboot: burn-in plan %s: %v\n", *planFile, err)
			return 1
		}
		fmt.Fprintf(stdout, "ingot-agent: burn-in: %d checks, duration %s, deadline %s\n", len(plan.Checks), plan.BurnIn.Duration, plan.BurnIn.Deadline())
		r := burnin.Runner{Logf: func(f string, a ...any) { fmt.Fprintf(stdout, "ingot-agent: "+f+"\n", a...) },
			Pair: func(ctx context.Context, check, addr string) (api.Peer, error) {
				return client.Peer(ctx, api.PeerRequest{Check: check, Address: addr})
			}}
		report.BurnIn = r.Run(ctx, plan)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := client.FirstBoot(ctx, report); err != nil {
		fmt.Fprintf(stdout, "ingot-agent: firstboot: %v\n", err)
		return 1
	}
	// The secret is spent: remove it (and the plan) from the installed
	// system. Only regular files the agent wrote: never a device such as
	// --env /dev/null.
	for _, f := range []string{*envFile, *planFile} {
		if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(f); err != nil {
			fmt.Fprintf(stdout, "ingot-agent: firstboot: removing %s: %v\n", f, err)
		}
	}
	var drivers []string
	for k, v := range sw.Drivers {
		drivers = append(drivers, k+"="+v)
	}
	sort.Strings(drivers)
	fmt.Fprintf(stdout, "ingot-agent: firstboot reported kernel=%s os=%q drivers=%s\n", sw.Kernel, sw.OSRelease, strings.Join(drivers, ","))
	return 0
}

func parseEnv(b []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			m[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return m
}
