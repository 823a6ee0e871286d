// Package serve runs ingot's boot services (DHCP, TFTP, HTTP boot and
// whatever the API mounts on the same HTTP mux) in one process, from one
// Config, under one supervisor with graceful shutdown.
//
// Configuration comes from four layers, later ones winning:
// built-in defaults < config file (--config, YAML or JSON) < INGOT_* environment
// variables < command-line flags. Every field has one flag; its environment
// variable is INGOT_ + the flag name upper-cased with dashes as underscores
// (--http-addr -> INGOT_HTTP_ADDR); its file key is the flag name with
// underscores (http_addr). List flags (--pool) repeat, or take several values
// separated by ';'; a list given in a higher layer replaces the lower one.
package serve

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/tokenlife"
	"github.com/ingot-dev/ingot/pkg/uki"
)

// Config is every setting of `ingot serve`.
type Config struct {
	Config    string `yaml:"-"` // the file this was loaded from (flag only)
	Interface string `yaml:"interface"`
	Data      string `yaml:"data"`
	DB        string `yaml:"db"`
	Recipes   string `yaml:"recipes"`
	ServerIP  string `yaml:"server_ip"`
	PublicURL string `yaml:"public_url"`
	HTTPAddr  string `yaml:"http_addr"`
	LogLevel  string `yaml:"log_level"`

	// The API (operator and agent routes, /metrics) has its own HTTPS
	// listener at APIAddr, bindable apart from the boot network; "" puts it
	// on the boot listener in plain HTTP (tokens travel in clear). Its
	// certificate is TLSCert/TLSKey, or else one from ingot's own CA in
	// DATA/tls, naming the server IP, loopback, this host and TLSSANs.
	// APIURL is how machines reach it (default https://SERVER-IP:PORT).
	APIAddr string   `yaml:"api_addr"`
	APIURL  string   `yaml:"api_url"`
	TLSCert string   `yaml:"tls_cert"`
	TLSKey  string   `yaml:"tls_key"`
	TLSSANs []string `yaml:"tls_san"`

	// HTTP limits: a request (headers and body) must arrive within
	// HTTPReadTimeout, an answer leave within HTTPWriteTimeout (artifact
	// and boot file downloads get a deadline from their size instead), an
	// idle keep-alive connection closes after HTTPIdleTimeout, and one
	// client address holds at most HTTPMaxConnsPerClient connections.
	HTTPReadTimeout       time.Duration `yaml:"http_read_timeout"`
	HTTPWriteTimeout      time.Duration `yaml:"http_write_timeout"`
	HTTPIdleTimeout       time.Duration `yaml:"http_idle_timeout"`
	HTTPMaxConnsPerClient int           `yaml:"http_max_conns_per_client"`
	// PublicRate is how many requests per second one address may make to
	// the routes that need no credential (/ipxe, /uki/, /boot/, the first
	// request of an /artifacts/ or /vmedia/ URL, the by-MAC agent routes),
	// in bursts of twice that; 0: unlimited.
	PublicRate float64 `yaml:"public_rate"`
	// TokenMaxTTL is the longest an operator token may live: a longer
	// lifetime is refused and older tokens end there.
	TokenMaxTTL time.Duration `yaml:"token_max_ttl"`

	RA       bool   `yaml:"ra"`
	RAPrefix string `yaml:"ra_prefix"`

	DHCP      string        `yaml:"dhcp"`
	Pools     []string      `yaml:"pool"`
	LeaseTime time.Duration `yaml:"lease_time"`
	Unknown   string        `yaml:"unknown"`

	TFTP             bool          `yaml:"tftp"`
	TFTPPort         int           `yaml:"tftp_port"`
	TFTPMaxTransfers int           `yaml:"tftp_max_transfers"`
	TFTPMaxPerClient int           `yaml:"tftp_max_per_client"`
	TFTPFirstACKWait time.Duration `yaml:"tftp_first_ack_wait"`
	TFTPBlockSize    int           `yaml:"tftp_max_blksize"`
	IPXEDir          string        `yaml:"ipxe_dir"`
	BootDir          string        `yaml:"boot_dir"`
	BootLinkTargets  []string      `yaml:"boot_link_targets"`
	// FirstStagePins pin the bytes of the first stages firmware fetches
	// (TFTP and /boot/): name as clients ask for it -> sha256, "off" for
	// none (default: Debian 12's ipxe package, bootfiles.DebianIPXEPins).
	// A file whose bytes differ is named in the log at start and refused
	// at every request; the others are served.
	FirstStagePins map[string]string `yaml:"first_stage_pin"`
	// EFIStubSHA256 and EFIStubARM64SHA256 pin systemd's EFI stubs the
	// agent UKIs are built on ("off": unchecked; default Debian 12's
	// systemd-boot-efi, uki.DebianStubSHA256): a changed stub is named at
	// start and /uki/ answers 503.
	EFIStubSHA256      string `yaml:"efi_stub_sha256"`
	EFIStubARM64SHA256 string `yaml:"efi_stub_arm64_sha256"`

	DiscoveryKernel  string `yaml:"discovery_kernel"`
	DiscoveryInitrd  string `yaml:"discovery_initrd"`
	DiscoveryCmdline string `yaml:"discovery_cmdline"`

	// BMC credential references may name files only inside
	// BMCCredentialsDir and variables only starting with
	// BMCCredentialEnvPrefix (pkg/credential.Policy).
	BMCCredentialsDir      string `yaml:"bmc_credentials_dir"`
	BMCCredentialEnvPrefix string `yaml:"bmc_credential_env_prefix"`
	// SecretKeyFile holds the key BMC credentials are sealed with in the
	// store (secret:NAME; default DATA/secrets.key, made on first start).
	SecretKeyFile string `yaml:"secret_key_file"`
	// BMCRotateEvery rotates each secret: BMC password this often (0: only
	// on request, `ingot bmc rotate`).
	BMCRotateEvery time.Duration `yaml:"bmc_rotate_every"`

	// Telemetry: every enrolled BMC is polled each TelemetryInterval (0:
	// never); alert transitions go to AlertWebhook and AlertmanagerURL too.
	TelemetryInterval time.Duration `yaml:"telemetry_interval"`
	// InventoryRefresh inspects every ready machine through its BMC this
	// often (drift from the recipe becomes an event; 0: never).
	InventoryRefresh time.Duration `yaml:"inventory_refresh"`
	// DrillMaxAge: a class whose last passing restore drill is older is
	// not scale-ready (0: any age).
	DrillMaxAge     time.Duration `yaml:"drill_max_age"`
	AlertWebhook    string        `yaml:"alert_webhook"`
	AlertmanagerURL string        `yaml:"alertmanager_url"`

	// AgentBinding ties a credential requester's address to a machine's
	// MAC (pkg/agentauth): lease, neighbour or first-use; "" picks lease
	// with --dhcp full and neighbour otherwise.
	AgentBinding string `yaml:"agent_binding"`

	// FirmwareURL is the boot listener as BMCs reach it: firmware packages
	// are served there at /firmware/JOB/TOKEN/SHA256 (default: PublicURL).
	FirmwareURL string `yaml:"firmware_url"`
	// FirmwareTimeout bounds one package's update on one node (start, the
	// BMC's task, the reset, the version read back).
	FirmwareTimeout time.Duration `yaml:"firmware_timeout"`
	// FirmwarePoll is the first wait before reading a firmware task and
	// the most between two reads of a version (the next task read comes
	// when the task's progress says it ends).
	FirmwarePoll time.Duration `yaml:"firmware_poll"`
	// Instance names this ingot among the instances sharing an etcd store
	// (default: the host name); InstanceTTL is its membership lease: how
	// long its jobs wait for another instance after it dies (pkg/scaleout).
	Instance    string        `yaml:"instance"`
	InstanceTTL time.Duration `yaml:"instance_ttl"`
	// StoreCompactEvery: on etcd, the elected instance compacts the
	// cluster's history older than this, on this schedule (0: never).
	StoreCompactEvery time.Duration `yaml:"store_compact_every"`
}

// Defaults returns the built-in defaults. DB and BootDir, when left empty,
// are derived from Data by Load.
func Defaults() Config {
	return Config{
		Data:                  "/var/lib/ingot",
		HTTPAddr:              ":8080",
		APIAddr:               ":8443",
		LogLevel:              "info",
		HTTPReadTimeout:       30 * time.Second,
		HTTPWriteTimeout:      2 * time.Minute,
		HTTPIdleTimeout:       time.Minute,
		HTTPMaxConnsPerClient: 32,
		PublicRate:            20,
		TokenMaxTTL:           tokenlife.DefaultMax,
		TelemetryInterval:     time.Minute,
		InventoryRefresh:      24 * time.Hour,
		DrillMaxAge:           30 * 24 * time.Hour,
		RA:                    true,
		DHCP:                  "full",
		LeaseTime:             time.Hour,
		Unknown:               "discover",
		TFTP:                  true,
		TFTPPort:              69,
		TFTPMaxTransfers:      64,
		TFTPMaxPerClient:      4,
		TFTPFirstACKWait:      2 * time.Second,
		TFTPBlockSize:         65464,
		IPXEDir:               "/usr/lib/ipxe",
		// Debian's ipxe package links exactly these into /boot; never all of it.
		BootLinkTargets:    []string{"/boot/ipxe.efi", "/boot/ipxe.lkrn"},
		FirstStagePins:     bootfiles.DebianIPXEPins(),
		EFIStubSHA256:      uki.DebianStubSHA256(uki.ArchAMD64),
		EFIStubARM64SHA256: uki.DebianStubSHA256(uki.ArchARM64),
		DiscoveryKernel:    "agent-vmlinuz",
		// Where BMC credential files live; env: references need this prefix.
		BMCCredentialsDir:      "/etc/ingot/bmc",
		BMCCredentialEnvPrefix: "INGOT_BMC_",
		DiscoveryInitrd:        "agent-initrd",
		FirmwareTimeout:        30 * time.Minute,
		FirmwarePoll:           5 * time.Second,
		InstanceTTL:            15 * time.Second,
		StoreCompactEvery:      time.Hour,
	}
}

// flags binds every field of c to fs.
func (c *Config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Config, "config", c.Config, "config file (YAML or JSON; keys are the flag names with underscores)")
	fs.StringVar(&c.Interface, "interface", c.Interface, "boot network interface; DHCP and TFTP answer only there (required for DHCP and TFTP)")
	fs.StringVar(&c.Data, "data", c.Data, "data directory: ingot.db, artifacts/, boot/")
	fs.StringVar(&c.DB, "db", c.DB, "the store: a bbolt file, as a path or bolt:///PATH (default DATA/ingot.db), or etcd://HOST:2379,HOST:2379/PREFIX shared by several instances (README: The etcd store)")
	fs.StringVar(&c.Recipes, "recipes", c.Recipes, "recipes directory (*.yaml); empty: no recipes, machines get an error script")
	fs.StringVar(&c.ServerIP, "server-ip", c.ServerIP, "our IPv4 address on --interface (default: the interface's first IPv4 address; must belong to it)")
	fs.StringVar(&c.PublicURL, "public-url", c.PublicURL, "URL machines reach the HTTP server at (default http://SERVER-IP:HTTP-PORT)")
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "boot HTTP listen address, plain HTTP (iPXE scripts, boot files, artifacts; everything with --api-addr '')")
	fs.StringVar(&c.APIAddr, "api-addr", c.APIAddr, "API listen address, HTTPS (operator and agent API, /metrics); '' serves the API on --http-addr in plain HTTP")
	fs.StringVar(&c.APIURL, "api-url", c.APIURL, "URL machines reach the API at (default https://SERVER-IP:API-PORT)")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM certificate chain for the API (default: one from ingot's own CA in DATA/tls); reloaded on SIGHUP")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM private key of --tls-cert")
	fs.Var(listValue{&c.TLSSANs, new(bool)}, "tls-san", "extra host names or addresses in the certificate ingot's CA makes (';'-separated)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.DurationVar(&c.HTTPReadTimeout, "http-read-timeout", c.HTTPReadTimeout, "a request's headers and body must arrive within this")
	fs.DurationVar(&c.HTTPWriteTimeout, "http-write-timeout", c.HTTPWriteTimeout, "an answer must leave within this (downloads get a deadline from their size)")
	fs.DurationVar(&c.HTTPIdleTimeout, "http-idle-timeout", c.HTTPIdleTimeout, "an idle keep-alive connection closes after this")
	fs.Float64Var(&c.PublicRate, "public-rate", c.PublicRate, "requests per second one address may make to routes that need no credential (/ipxe, /uki/, /boot/, the first request of an /artifacts/ or /vmedia/ URL, by-MAC agent routes; Range reads of a known artifact and repeated CD reads are not counted), bursts of twice that; 0: unlimited")
	fs.DurationVar(&c.TokenMaxTTL, "token-max-ttl", c.TokenMaxTTL, "the longest an operator token may live: a longer --ttl is refused and older tokens end")
	fs.IntVar(&c.HTTPMaxConnsPerClient, "http-max-conns-per-client", c.HTTPMaxConnsPerClient, "open HTTP connections one client address may hold; more are closed at once")
	fs.BoolVar(&c.RA, "ra", c.RA, "answer IPv6 router solicitations on --interface with a ULA prefix, no default route (iPXE otherwise waits ~14 s)")
	fs.StringVar(&c.RAPrefix, "ra-prefix", c.RAPrefix, "IPv6 /64 advertised by --ra (default fd00:696e:676f:7400::/64)")
	fs.StringVar(&c.DHCP, "dhcp", c.DHCP, "DHCP mode: full, proxy or off")
	fs.Var(listValue{&c.Pools, new(bool)}, "pool", "DHCP pool SUBNET,START-END[,router=IP][,dns=IP+IP][,domain=NAME][,lease=1h] (repeat, or separate with ';')")
	fs.DurationVar(&c.LeaseTime, "lease-time", c.LeaseTime, "default DHCP lease time")
	fs.StringVar(&c.Unknown, "unknown", c.Unknown, "unknown machines: discover (boot the discovery agent) or ignore")
	fs.BoolVar(&c.TFTP, "tftp", c.TFTP, "serve iPXE binaries over TFTP")
	fs.IntVar(&c.TFTPPort, "tftp-port", c.TFTPPort, "TFTP port")
	fs.IntVar(&c.TFTPMaxTransfers, "tftp-max-transfers", c.TFTPMaxTransfers, "concurrent TFTP transfers; more requests wait unanswered (clients resend) for a free slot")
	fs.IntVar(&c.TFTPMaxPerClient, "tftp-max-per-client", c.TFTPMaxPerClient, "TFTP transfers, running or waiting, of one client address; more get no answer")
	fs.DurationVar(&c.TFTPFirstACKWait, "tftp-first-ack-wait", c.TFTPFirstACKWait, "a new TFTP transfer whose first packet is not acknowledged within this ends and frees its slot")
	fs.IntVar(&c.TFTPBlockSize, "tftp-max-blksize", c.TFTPBlockSize, "largest TFTP blksize granted (also clamped to the interface MTU - 28)")
	fs.StringVar(&c.IPXEDir, "ipxe-dir", c.IPXEDir, "iPXE binaries from the distribution (Debian package ipxe)")
	fs.StringVar(&c.BootDir, "boot-dir", c.BootDir, "override directory searched before --ipxe-dir (default DATA/boot)")
	fs.Var(listValue{&c.BootLinkTargets, new(bool)}, "boot-link-targets", "files symlinks in the boot directories may point at, or folders they may point into (';'-separated; default Debian's /boot/ipxe.efi and /boot/ipxe.lkrn)")
	fs.Var(pinsValue{&c.FirstStagePins}, "first-stage-pin", "NAME=SHA256: the bytes a first stage (TFTP, /boot/) must have, or NAME=off; a changed file is named at start and refused (repeat, or separate with ';'; default: Debian 12's ipxe package)")
	fs.StringVar(&c.EFIStubSHA256, "efi-stub-sha256", c.EFIStubSHA256, "sha256 systemd's x86-64 EFI stub must have for agent UKIs (off: unchecked; default: Debian 12's systemd-boot-efi)")
	fs.StringVar(&c.EFIStubARM64SHA256, "efi-stub-arm64-sha256", c.EFIStubARM64SHA256, "sha256 systemd's arm64 EFI stub must have for agent UKIs (off: unchecked; default: Debian 12's systemd-boot-efi:arm64)")
	fs.StringVar(&c.DiscoveryKernel, "discovery-kernel", c.DiscoveryKernel, "artifact name or sha256 of the kernel unknown machines boot")
	fs.StringVar(&c.DiscoveryInitrd, "discovery-initrd", c.DiscoveryInitrd, "artifact name or sha256 of the initrd unknown machines boot")
	fs.StringVar(&c.DiscoveryCmdline, "discovery-cmdline", c.DiscoveryCmdline, "extra kernel arguments for the discovery agent, e.g. console=ttyS0")
	fs.StringVar(&c.BMCCredentialsDir, "bmc-credentials-dir", c.BMCCredentialsDir, "BMC credential references may name files only inside this folder (file:DIR/NODE)")
	fs.StringVar(&c.BMCCredentialEnvPrefix, "bmc-credential-env-prefix", c.BMCCredentialEnvPrefix, "BMC credential references may name environment variables only with this prefix (env:PREFIXNODE)")
	fs.StringVar(&c.SecretKeyFile, "secret-key-file", c.SecretKeyFile, "key file secrets are sealed with (0600; default DATA/secrets.key, made on first start; keep it out of database backups)")
	fs.DurationVar(&c.BMCRotateEvery, "bmc-rotate-every", c.BMCRotateEvery, "rotate each secret: BMC password this often, e.g. 720h (0: only with ingot bmc rotate)")
	fs.DurationVar(&c.TelemetryInterval, "telemetry-interval", c.TelemetryInterval, "poll every enrolled BMC this often for power, temperatures, fans and PSUs (0: off)")
	fs.DurationVar(&c.InventoryRefresh, "inventory-refresh", c.InventoryRefresh, "inspect every ready machine through its BMC this often; drift from its recipe (a GPU off the bus, a DIMM gone, firmware changed) becomes an event (0: never)")
	fs.DurationVar(&c.DrillMaxAge, "drill-max-age", c.DrillMaxAge, "a class whose last passing restore drill (ingot drill) is older is not scale-ready, and its rollouts say so (0: any age)")
	fs.StringVar(&c.AlertWebhook, "alert-webhook", c.AlertWebhook, "POST every alert that fires or resolves to this URL as JSON")
	fs.StringVar(&c.AlertmanagerURL, "alertmanager-url", c.AlertmanagerURL, "send alerts to this Alertmanager (or compatible) at URL/api/v2/alerts")
	fs.StringVar(&c.AgentBinding, "agent-binding", c.AgentBinding, "how a machine's credential requester is recognised: lease (ingot's DHCP lease), neighbour "+
		"(the ARP entry on --interface, on any interface without it) or first-use (the first address to ask in each boot attempt; routed sites without ingot's DHCP, see README); default lease with --dhcp full, else neighbour")
	fs.StringVar(&c.FirmwareURL, "firmware-url", c.FirmwareURL, "the boot listener as BMCs reach it: firmware campaigns serve each package there at an unguessable per-job URL "+
		"(/firmware/JOB/TOKEN/SHA256, Range reads not rate limited) for SimpleUpdate (default: --public-url)")
	fs.DurationVar(&c.FirmwarePoll, "firmware-poll", c.FirmwarePoll, "the first wait before reading a firmware update's task (later reads come when its progress says it ends) and between reads of a version")
	fs.DurationVar(&c.FirmwareTimeout, "firmware-timeout", c.FirmwareTimeout, "the longest one firmware package's update on one node may take (start, the BMC's task, the reset, the version read back)")
	fs.StringVar(&c.Instance, "instance", c.Instance, "this instance's name among those sharing an etcd store (default: the host name; unique)")
	fs.DurationVar(&c.InstanceTTL, "instance-ttl", c.InstanceTTL, "etcd store: this instance's lease; its jobs move to another instance this long after it dies (5s at least)")
	fs.DurationVar(&c.StoreCompactEvery, "store-compact-every", c.StoreCompactEvery, "etcd store: the elected instance compacts the cluster's history older than this, this often (0: never; leave it to etcd's own auto-compaction)")
}

// PublicLimiter is the per-address limit of the credential-less routes.
func (c Config) PublicLimiter() *ratelimit.Limiter {
	return ratelimit.New(c.PublicRate, int(2*c.PublicRate), 0, nil)
}

// Binding is the agent binding in force (AgentBinding or its default).
func (c Config) Binding() string {
	switch {
	case c.AgentBinding != "":
		return c.AgentBinding
	case c.DHCP == "full":
		return "lease"
	}
	return "neighbour"
}

// listValue is a repeatable flag; the first Set within one FlagSet replaces
// what lower layers put there.
type listValue struct {
	p     *[]string
	fresh *bool
}

func (l listValue) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ";")
}

func (l listValue) Set(v string) error {
	if !*l.fresh {
		*l.p, *l.fresh = nil, true
	}
	for _, s := range strings.Split(v, ";") {
		if s = strings.TrimSpace(s); s != "" {
			*l.p = append(*l.p, s)
		}
	}
	return nil
}

// pinsValue is a repeatable NAME=SHA256 flag over a map: each Set adds or
// replaces the names it gives (NAME=off unpins), others keep their pins.
type pinsValue struct{ p *map[string]string }

func (v pinsValue) String() string {
	if v.p == nil {
		return ""
	}
	var kv []string
	for k, s := range *v.p {
		kv = append(kv, k+"="+s)
	}
	sort.Strings(kv)
	return strings.Join(kv, ";")
}

func (v pinsValue) Set(s string) error {
	for _, kv := range strings.Split(s, ";") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, sum, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("%q: expected NAME=SHA256 or NAME=off", kv)
		}
		if *v.p == nil {
			*v.p = map[string]string{}
		}
		(*v.p)[name] = sum
	}
	return nil
}

// Pins returns the first-stage pins in force (those set to "off" left out).
func (c Config) Pins() map[string]string {
	out := map[string]string{}
	for name, sum := range c.FirstStagePins {
		if sum != "off" {
			out[name] = sum
		}
	}
	return out
}

// validatePins checks every pin is a sha256 (64 hex digits) or off.
func (c Config) validatePins() error {
	isSum := func(s string) bool { return artifact.ValidSHA256(strings.ToLower(s)) }
	names := make([]string, 0, len(c.FirstStagePins))
	for name := range c.FirstStagePins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if sum := c.FirstStagePins[name]; sum != "off" && !isSum(sum) {
			return fmt.Errorf("--first-stage-pin %s=%s: expected a sha256 (64 hex digits) or off", name, sum)
		}
		if _, err := bootfiles.CleanPath(name); err != nil {
			return fmt.Errorf("--first-stage-pin %s: %w", name, err)
		}
	}
	for flag, sum := range map[string]string{"--efi-stub-sha256": c.EFIStubSHA256, "--efi-stub-arm64-sha256": c.EFIStubARM64SHA256} {
		if sum != "" && sum != "off" && !isSum(sum) {
			return fmt.Errorf("%s %q: expected a sha256 (64 hex digits) or off", flag, sum)
		}
	}
	return nil
}

// stubPin is a stub's pin as httpboot takes it ("" for off).
func stubPin(sum string) string {
	if sum == "off" {
		return ""
	}
	return sum
}

// Load builds the Config from defaults, the config file, the environment
// (getenv) and args. It returns flag.ErrHelp after printing usage for -h.
func Load(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	// Pass 1 only finds the config file; flags are applied again last.
	var scratch Config
	pre := flag.NewFlagSet("serve", flag.ContinueOnError)
	pre.SetOutput(io.Discard)
	scratch.flags(pre)
	if err := pre.Parse(args); err != nil && !errors.Is(err, flag.ErrHelp) {
		return Config{}, fmt.Errorf("ingot serve: %w", err)
	}
	cfg := Defaults()
	path := scratch.Config
	if path == "" {
		path = getenv("INGOT_CONFIG")
	}
	if path != "" {
		if err := loadFile(path, &cfg); err != nil {
			return Config{}, err
		}
		cfg.Config = path
	}
	env := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg.flags(env)
	var bad error
	env.VisitAll(func(f *flag.Flag) {
		key := EnvName(f.Name)
		if v := getenv(key); v != "" && bad == nil {
			if err := f.Value.Set(v); err != nil {
				bad = fmt.Errorf("environment %s=%q: %w", key, v, err)
			}
		}
	})
	if bad != nil {
		return Config{}, bad
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(usage)
	cfg.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(usage, "Usage: ingot serve --interface IF --data DIR [flags]\n\n"+
			"Each flag is also INGOT_<FLAG> (dashes as underscores) and a config file key (underscores).\n"+
			"Precedence: flags > environment > config file > defaults.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("ingot serve: unexpected argument %q (all settings are flags)", fs.Arg(0))
	}
	if cfg.DB == "" {
		cfg.DB = filepath.Join(cfg.Data, "ingot.db")
	}
	if cfg.BootDir == "" {
		cfg.BootDir = filepath.Join(cfg.Data, "boot")
	}
	if cfg.SecretKeyFile == "" {
		cfg.SecretKeyFile = filepath.Join(cfg.Data, "secrets.key")
	}
	return cfg, nil
}

// EnvName is the environment variable that sets the flag name.
func EnvName(flagName string) string {
	return "INGOT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// loadFile decodes a YAML (or JSON, which YAML accepts) file over cfg,
// refusing unknown keys so a typo is an error, not a silent default.
func loadFile(path string, cfg *Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w (keys are the flag names with underscores, e.g. http_addr)", path, err)
	}
	return nil
}

// Validate checks the settings that do not need the system.
func (c Config) Validate() error {
	switch c.DHCP {
	case "full", "proxy", "off":
	default:
		return fmt.Errorf("--dhcp %q: expected full, proxy or off", c.DHCP)
	}
	switch c.Unknown {
	case "discover", "ignore":
	default:
		return fmt.Errorf("--unknown %q: expected discover or ignore", c.Unknown)
	}
	if c.Interface == "" && c.DHCP != "off" {
		return fmt.Errorf("DHCP (--dhcp %s) needs --interface IF: ingot never answers DHCP on an interface it was not given "+
			"(pass --dhcp off to run without DHCP)", c.DHCP)
	}
	if c.Interface == "" && c.TFTP {
		return errors.New("TFTP needs --interface IF: ingot binds TFTP only to the boot interface's address " +
			"(pass --tftp=false to run without TFTP)")
	}
	if c.DHCP == "full" && len(c.Pools) == 0 {
		return errors.New("--dhcp full needs at least one --pool SUBNET,START-END (or --dhcp proxy beside the site's DHCP server)")
	}
	if c.Data == "" {
		return errors.New("--data is empty: expected the directory for ingot.db and artifacts")
	}
	if c.FirmwarePoll <= 0 {
		return fmt.Errorf("--firmware-poll %s: expected a positive duration, e.g. 5s", c.FirmwarePoll)
	}
	if c.FirmwareTimeout <= 0 {
		return fmt.Errorf("--firmware-timeout %s: expected a positive duration, e.g. 30m", c.FirmwareTimeout)
	}
	if u := c.FirmwareURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("--firmware-url %q: expected an http:// or https:// URL the BMCs reach the boot listener at", u)
	}
	if c.TokenMaxTTL <= 0 {
		return fmt.Errorf("--token-max-ttl %s: expected a positive lifetime, e.g. 8760h", c.TokenMaxTTL)
	}
	if c.TelemetryInterval < 0 || (c.TelemetryInterval > 0 && c.TelemetryInterval < 5*time.Second) {
		return fmt.Errorf("--telemetry-interval %s: expected 0 (off) or at least 5s (BMCs answer slowly)", c.TelemetryInterval)
	}
	for flag, u := range map[string]string{"--alert-webhook": c.AlertWebhook, "--alertmanager-url": c.AlertmanagerURL} {
		if u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("%s %q: expected an http:// or https:// URL", flag, u)
		}
	}
	if err := c.validatePins(); err != nil {
		return err
	}
	if c.PublicRate < 0 {
		return fmt.Errorf("--public-rate %g: expected requests per second, 0 for no limit", c.PublicRate)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both, or neither for a certificate from ingot's own CA in DATA/tls")
	}
	if c.APIAddr == "" && (c.TLSCert != "" || c.APIURL != "") {
		return errors.New("--tls-cert and --api-url need the API's own listener (--api-addr)")
	}
	if c.APIURL != "" && !strings.HasPrefix(c.APIURL, "https://") {
		return fmt.Errorf("--api-url %q: expected https://HOST:PORT", c.APIURL)
	}
	if c.APIAddr != "" && c.APIAddr == c.HTTPAddr && !strings.HasSuffix(c.APIAddr, ":0") {
		return fmt.Errorf("--api-addr and --http-addr are both %s: give the API its own port, or --api-addr '' to serve it on the boot listener in plain HTTP", c.APIAddr)
	}
	switch c.Binding() {
	case "lease":
		if c.DHCP != "full" {
			return fmt.Errorf("--agent-binding lease needs --dhcp full (ingot's own leases); with --dhcp %s use neighbour or first-use", c.DHCP)
		}
	case "neighbour", "first-use":
	default:
		return fmt.Errorf("--agent-binding %q: expected lease, neighbour or first-use", c.AgentBinding)
	}
	return nil
}
