package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent"
	"github.com/ingot-dev/ingot/pkg/agent/firstboot"
	"github.com/ingot-dev/ingot/pkg/api"
)

// runFirstboot implements `ingot-agent firstboot`, run by the installed OS's
// first-boot unit: it reports the kernel, OS release and driver versions.
// The server and token come from the flags, else from the kernel command
// line (the agent passes ingot.server/ingot.token/ingot.machine to a kexec'd
// kernel), else from an env file (INGOT_SERVER=, INGOT_TOKEN=).
func runFirstboot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ingot-agent firstboot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "ingot server URL")
	token := fs.String("token", "", "the machine's token")
	cmdline := fs.String("cmdline", "/proc/cmdline", "kernel command line file to read ingot.server and ingot.token from")
	envFile := fs.String("env", "/etc/ingot/firstboot.env", "file with INGOT_SERVER= and INGOT_TOKEN= lines")
	root := fs.String("root", "/", "root of /proc, /sys and /etc to read")
	mac := fs.String("mac", "", "without a token, identify the machine by this MAC (default: the first NIC's)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var cfg agent.Config
	if b, err := os.ReadFile(*cmdline); err == nil {
		cfg, _ = agent.ParseCmdline(string(b))
	}
	if b, err := os.ReadFile(*envFile); err == nil {
		env := parseEnv(b)
		if cfg.Server == "" {
			cfg.Server = env["INGOT_SERVER"]
		}
		if cfg.Token == "" {
			cfg.Token = env["INGOT_TOKEN"]
		}
	}
	if *server != "" {
		cfg.Server = *server
	}
	if *token != "" {
		cfg.Token = *token
	}
	if cfg.Token == "" {
		// The installed OS of a rebooted machine holds no token: the server
		// accepts the report by MAC from the address it leased to it.
		cfg.Mode, cfg.MAC = "discovery", *mac
		if cfg.MAC == "" {
			cfg.MAC = firstMAC(*root)
		}
	}
	cfg.OnError = agent.OnErrorWait
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stdout, "ingot-agent: firstboot: %v\n", err)
		return 1
	}
	sw, err := firstboot.Collect(*root)
	if err != nil {
		fmt.Fprintf(stdout, "ingot-agent: firstboot: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	client := api.NewAgentClient(cfg.Server, cfg.Token, nil)
	client.MAC = cfg.MAC
	if err := client.FirstBoot(ctx, sw); err != nil {
		fmt.Fprintf(stdout, "ingot-agent: firstboot: %v\n", err)
		return 1
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

// firstMAC is the MAC of the first physical NIC (by name) under root/sys.
func firstMAC(root string) string {
	dir := filepath.Join(root, "sys/class/net")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "device")); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, e.Name(), "address")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}
