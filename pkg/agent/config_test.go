package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCmdline(t *testing.T) {
	base := Config{OnError: OnErrorWait, TaskWait: 10 * time.Minute, LLDPWait: 5 * time.Second}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	tests := map[string]struct {
		in   string
		want Config
		bad  string
	}{
		"ipxe line": {
			in:   "initrd=initrd.img console=ttyS0 panic=-1 ingot.server=http://10.77.0.1:8080/ ingot.token=abc123 ingot.machine=m-1\n",
			want: with(func(c *Config) { c.Server, c.Token, c.Machine = "http://10.77.0.1:8080", "abc123", "m-1" }),
		},
		"every key": {
			in: "ingot.server=http://s ingot.token=t ingot.onerror=poweroff ingot.iface=eth1 ingot.disk=/dev/sdb ingot.debug ingot.taskwait=90s",
			want: with(func(c *Config) {
				c.Server, c.Token, c.OnError, c.Iface, c.Disk, c.Debug, c.TaskWait = "http://s", "t", OnErrorPoweroff, "eth1", "/dev/sdb", true, 90*time.Second
			}),
		},
		"quoted":       {in: `"ingot.machine=a b" ingot.token="x y"`, want: with(func(c *Config) { c.Machine, c.Token = "a b", "x y" })},
		"debug=0":      {in: "ingot.debug=0", want: base},
		"unknown key":  {in: "ingot.future=1 ingotx=2", want: with(func(c *Config) { c.Unknown = []string{"ingot.future"} })},
		"empty":        {in: "", want: base},
		"last wins":    {in: "ingot.token=a ingot.token=b", want: with(func(c *Config) { c.Token = "b" })},
		"bad taskwait": {in: "ingot.taskwait=soon", bad: "ingot.taskwait"},
		"lldpwait":     {in: "ingot.lldpwait=35s", want: with(func(c *Config) { c.LLDPWait = 35 * time.Second })},
		"lldp off":     {in: "ingot.lldpwait=0", want: with(func(c *Config) { c.LLDPWait = 0 })},
		"bad lldpwait": {in: "ingot.lldpwait=-1s", bad: "ingot.lldpwait"},
		"firstboot":    {in: "ingot.firstboot=mf_x", want: with(func(c *Config) { c.FirstBoot = "mf_x" })},
		"discovery": {in: "ingot.server=http://s ingot.mode=discovery ingot.mac=52:54:00:00:00:01",
			want: with(func(c *Config) { c.Server, c.Mode, c.MAC = "http://s", "discovery", "52:54:00:00:00:01" })},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCmdline(tc.in)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("err = %v, want one naming %s", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Server: "http://10.77.0.1:8080", Token: "t", OnError: OnErrorWait}
	tests := map[string]struct {
		edit func(*Config)
		bad  string
	}{
		"ok":                 {func(*Config) {}, ""},
		"no server":          {func(c *Config) { c.Server = "" }, "ingot.server is missing"},
		"not a url":          {func(c *Config) { c.Server = "10.77.0.1:8080" }, "http://"},
		"no token":           {func(c *Config) { c.Token = "" }, "ingot.token is missing"},
		"bad onerror":        {func(c *Config) { c.OnError = "explode" }, "ingot.onerror"},
		"relative disk":      {func(c *Config) { c.Disk = "sda" }, "absolute"},
		"discovery no token": {func(c *Config) { c.Token, c.Mode, c.MAC = "", "discovery", "52:54:00:00:00:01" }, ""},
		"discovery no mac":   {func(c *Config) { c.Token, c.Mode = "", "discovery" }, "ingot.mac"},
		"bad mode":           {func(c *Config) { c.Mode = "wipe" }, "ingot.mode"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if (tc.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("err = %v, want %q", err, tc.bad)
			}
		})
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add("console=ttyS0 ingot.server=http://10.77.0.1:8080 ingot.token=abc ingot.machine=m1")
	f.Add(`"ingot.machine=a b" ingot.debug ingot.taskwait=1m ingot.onerror=reboot`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCmdline(s)
		if err != nil {
			return
		}
		if c.TaskWait <= 0 {
			t.Fatalf("taskwait %v", c.TaskWait)
		}
		_ = c.Validate()
		for _, w := range splitCmdline(s) {
			if w == "" && !strings.Contains(s, `"`) {
				t.Fatalf("empty word from %q", s)
			}
		}
	})
}
