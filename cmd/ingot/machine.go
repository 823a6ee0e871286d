package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

const machineUsage = `Usage: ingot machine COMMAND

Commands:
  add NAME --mac MAC [--mac MAC2] [--serial S] [--bmc URL] [--bmc-cred REF]
      [--recipe R] [--rack R] [--index N] [--location L] [--ip A]
                      enroll a machine (state: enrolled)
  ls [--recipe R] [--state S]
                      list machines
  show NODE           a machine, its last events and latest inventory
  rm NODE             forget a machine, its inventory and events
  set-recipe NODE RECIPE [--recipes DIR]
                      assign a recipe (DIR/RECIPE.yaml must exist)
  inspect ...         read a machine's inventory from its BMC
  waive NODE CHECK --reason TEXT
                      let one machine past one failed check (through the API)
  unwaive NODE CHECK  withdraw it

NODE is a machine's name or ID. Every command takes --db PATH (INGOT_DB) and
-o table|json.
`

// defaultStorePath is where the server keeps its database.
const defaultStorePath = "/var/lib/ingot/ingot.db"

// runMachine dispatches `ingot machine SUBCOMMAND`.
func runMachine(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, machineUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	sub := map[string]func(context.Context, *env, []string) error{
		"add":        runMachineAdd,
		"ls":         runMachineLs,
		"show":       runMachineShow,
		"rm":         runMachineRm,
		"set-recipe": runMachineSetRecipe,
		"inspect":    runMachineInspect,
		"waive":      runMachineWaive,
		"unwaive":    runMachineUnwaive,
	}[args[0]]
	if sub == nil {
		fmt.Fprintf(e.stderr, "ingot machine: unknown command %q\n\n%s", args[0], machineUsage)
		return errUsage
	}
	return sub(ctx, e, args[1:])
}

// storeCLIFlags are the flags every store-reading command shares.
type storeCLIFlags struct {
	db     string
	output string
}

func addStoreCLIFlags(fs *flag.FlagSet) *storeCLIFlags {
	f := &storeCLIFlags{}
	fs.StringVar(&f.db, "db", defaultStorePath, "ingot database file")
	fs.StringVar(&f.output, "o", "table", "output format: table or json")
	return f
}

func (f *storeCLIFlags) check() error {
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("-o %q: expected table or json", f.output)
	}
	return nil
}

// open opens the database; a missing file is an error here, since the CLI
// only reads and edits what the server (or `machine add`) created.
func (f *storeCLIFlags) open(create bool) (*store.Bolt, error) {
	if !create {
		if _, err := os.Stat(f.db); err != nil {
			return nil, fmt.Errorf("opening database: %w (set --db or INGOT_DB)", err)
		}
	}
	return store.Open(f.db, store.Options{Timeout: 5 * time.Second})
}

// parseWithArgs parses flags and positional arguments in any order
// (`machine add NAME --mac M` and `machine add --mac M NAME`), returning the
// positional ones. It returns errHelp after printing usage for -h.
func parseWithArgs(e *env, fs *flag.FlagSet, args []string) ([]string, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fs.Usage()
			return nil, errHelp
		}
	}
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := e.parse(fs, args); err != nil {
		return nil, err
	}
	for rest := fs.Args(); len(rest) > 0; rest = fs.Args() {
		if !strings.HasPrefix(rest[0], "-") || rest[0] == "-" {
			pos = append(pos, rest[0])
			if err := fs.Parse(rest[1:]); err != nil {
				return nil, errUsage
			}
			continue
		}
		if err := fs.Parse(rest); err != nil {
			return nil, errUsage
		}
	}
	return pos, nil
}

// parseNode parses the flags and the one NODE argument of a command and
// checks the output format; cmd prefixes its errors.
func parseNode(e *env, fs *flag.FlagSet, sf *storeCLIFlags, cmd string, args []string) (string, error) {
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return "", err
	}
	if err := wantArgs(fs, pos, "NODE"); err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	if err := sf.check(); err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return pos[0], nil
}

// openMachine opens the database and reads one machine by name or ID; the
// caller closes the store.
func (f *storeCLIFlags) openMachine(ctx context.Context, node string) (*store.Bolt, *machine.Machine, error) {
	st, err := f.open(false)
	if err != nil {
		return nil, nil, err
	}
	m, err := st.GetMachine(ctx, node)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, m, nil
}

// errHelp: usage was printed on request; the command succeeds.
var errHelp = errors.New("help shown")

// wantArgs checks the number of positional arguments.
func wantArgs(fs *flag.FlagSet, pos []string, names ...string) error {
	if len(pos) == len(names) {
		return nil
	}
	fs.Usage()
	return fmt.Errorf("expected %d argument(s) %s, got %d: %q", len(names), strings.Join(names, " "), len(pos), pos)
}

// repeatedFlag collects every value of a flag given more than once.
type repeatedFlag []string

func (r *repeatedFlag) String() string     { return strings.Join(*r, ",") }
func (r *repeatedFlag) Set(v string) error { *r = append(*r, v); return nil }

// operatorActor is the actor recorded in events the CLI appends.
func operatorActor(e *env) string {
	if u := e.getenv("USER"); u != "" {
		return "operator:" + u
	}
	return "operator:unknown"
}

func runMachineAdd(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine add", "machine add NAME --mac MAC [--mac MAC2] [--serial S] [--bmc URL] [--bmc-cred REF] [--recipe R] [--rack R] [--index N] [--location L] [--ip A]")
	sf := addStoreCLIFlags(fs)
	var macs repeatedFlag
	fs.Var(&macs, "mac", "MAC address of a boot NIC (repeat for more)")
	serial := fs.String("serial", "", "system serial number")
	bmc := fs.String("bmc", "", "BMC Redfish endpoint, e.g. https://10.0.0.5")
	bmcCred := fs.String("bmc-cred", "", "BMC credential reference: file:/etc/ingot/bmc/NODE or env:VAR")
	recipeName := fs.String("recipe", "", "recipe (server class) to assign")
	recipes := fs.String("recipes", "recipes", "folder holding RECIPE.yaml files, checked when --recipe is set")
	rack := fs.String("rack", "", "rack")
	index := fs.Int("index", 0, "the machine's index in its rack ({index} of the recipe's network.hostname)")
	location := fs.String("location", "", "free-form location: row/rack/unit")
	ip := fs.String("ip", "", "reserved IPv4 address")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos, "NAME"); err != nil {
		return fmt.Errorf("machine add: %w", err)
	}
	m := machine.Machine{Name: pos[0], Serial: *serial, Rack: *rack, Index: *index, Location: *location, Recipe: *recipeName,
		BMC: machine.BMC{Endpoint: *bmc, CredentialRef: *bmcCred}, State: machine.StateEnrolled}
	if err := checkMachineInput(&m, macs, *ip); err != nil {
		return fmt.Errorf("machine add: %w", err)
	}
	if err := sf.check(); err != nil {
		return fmt.Errorf("machine add: %w", err)
	}
	if m.Recipe != "" {
		if err := checkRecipeFile(*recipes, m.Recipe); err != nil {
			return fmt.Errorf("machine add: %w", err)
		}
	}
	st, err := sf.open(true)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.CreateMachine(ctx, &m); err != nil {
		return err
	}
	ev, err := st.AppendEvent(ctx, machine.Event{Machine: m.ID, Actor: operatorActor(e), Kind: "enrolled",
		To: m.State, Message: "enrolled with ingot machine add"})
	if err != nil {
		return err
	}
	if sf.output == "json" {
		return e.printJSON(m)
	}
	fmt.Fprintf(e.stdout, "enrolled %s (%s), event %d\n", m.Name, m.ID, ev.Seq)
	return nil
}

// helpOK turns "help was shown" into success.
func helpOK(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// checkMachineInput validates what an operator typed, naming the flag.
func checkMachineInput(m *machine.Machine, macs []string, ip string) error {
	if err := checkHostname(m.Name); err != nil {
		return err
	}
	if len(macs) == 0 {
		return errors.New("--mac: at least one MAC is required, e.g. --mac 52:54:00:12:34:56")
	}
	for _, mac := range macs {
		norm, err := machine.NormalizeMAC(mac)
		if err != nil {
			return fmt.Errorf("--mac %q: expected six hex bytes like 52:54:00:12:34:56", mac)
		}
		m.MACs = append(m.MACs, norm)
	}
	if m.BMC.Endpoint != "" {
		u, err := url.Parse(m.BMC.Endpoint)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("--bmc %q: expected a URL like https://10.0.0.5 or http://127.0.0.1:8443", m.BMC.Endpoint)
		}
	}
	if ref := m.BMC.CredentialRef; ref != "" && !strings.HasPrefix(ref, "file:") && !strings.HasPrefix(ref, "env:") {
		return fmt.Errorf("--bmc-cred %q: expected file:PATH or env:VARIABLE", ref)
	}
	if ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			return fmt.Errorf("--ip %q: expected an IPv4 address like 192.168.10.21", ip)
		}
		m.IPv4 = a.String()
	}
	return nil
}

// checkHostname accepts names usable as a hostname: letters, digits, '-'
// and '.', starting with a letter or digit.
func checkHostname(name string) error {
	ok := name != "" && len(name) <= 253
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '-' && r != '.')) {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("NAME %q: expected a hostname of letters, digits, '-' and '.' like gpu-r12-07", name)
	}
	return nil
}

// checkRecipeFile checks that dir/name.yaml exists.
func checkRecipeFile(dir, name string) error {
	if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return fmt.Errorf("recipe %q: expected a recipe name, not a path", name)
	}
	path := filepath.Join(dir, name+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("recipe %q: expected %s to exist (set --recipes DIR): %w", name, path, err)
	}
	if r, _ := recipe.Parse(path, data); r.IsTemplate() {
		return fmt.Errorf("recipe %q: %s is a template (template: true): it is only extended, never assigned to a machine", name, path)
	}
	return nil
}

func runMachineLs(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine ls", "machine ls [--recipe R] [--state S]")
	sf := addStoreCLIFlags(fs)
	recipeName := fs.String("recipe", "", "only machines with this recipe")
	state := fs.String("state", "", "only machines in this state")
	rack := fs.String("rack", "", "only machines in this rack")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos); err != nil {
		return fmt.Errorf("machine ls: %w", err)
	}
	if err := sf.check(); err != nil {
		return fmt.Errorf("machine ls: %w", err)
	}
	if s := machine.State(*state); s != "" && !s.Valid() {
		return fmt.Errorf("machine ls: --state %q: expected one of %v", *state, machine.States)
	}
	st, err := sf.open(false)
	if err != nil {
		return err
	}
	defer st.Close()
	ms, err := st.ListMachines(ctx, store.MachineFilter{Recipe: *recipeName, State: machine.State(*state), Rack: *rack})
	if err != nil {
		return err
	}
	if sf.output == "json" {
		if ms == nil {
			ms = []machine.Machine{}
		}
		return e.printJSON(ms)
	}
	tw := newCLITable(e.stdout, "NAME", "ID", "STATE", "RECIPE", "MACS", "BMC", "RACK", "UPDATED")
	for _, m := range ms {
		tw.row(m.Name, m.ID, string(m.State), m.Recipe, strings.Join(m.MACs, ","), m.BMC.Endpoint, m.Rack, tableTime(m.Updated))
	}
	return tw.flush()
}

// machineView is `machine show -o json`.
type machineView struct {
	Machine   machine.Machine  `json:"machine"`
	Events    []machine.Event  `json:"events"`
	Inventory *store.Snapshot  `json:"inventory"`
	Changes   []machine.Change `json:"changes_since_previous,omitempty"`
}

func runMachineShow(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine show", "machine show NODE")
	sf := addStoreCLIFlags(fs)
	node, err := parseNode(e, fs, sf, "machine show", args)
	if err != nil {
		return helpOK(err)
	}
	st, m, err := sf.openMachine(ctx, node)
	if err != nil {
		return err
	}
	defer st.Close()
	evs, err := st.LastEvents(ctx, m.ID, 5)
	if err != nil {
		return err
	}
	snap, err := st.Inventory(ctx, m.ID, 0)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if sf.output == "json" {
		if evs == nil {
			evs = []machine.Event{}
		}
		return e.printJSON(machineView{Machine: *m, Events: evs, Inventory: snap})
	}
	writeMachine(e.stdout, m)
	fmt.Fprintf(e.stdout, "\nLast events:\n")
	if len(evs) == 0 {
		fmt.Fprintln(e.stdout, "  none")
	} else if err := writeEvents(e.stdout, evs); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nInventory:\n")
	if snap == nil {
		fmt.Fprintf(e.stdout, "  none yet (run: ingot machine inspect %s)\n", m.Name)
		return nil
	}
	return writeInventorySummary(e.stdout, snap)
}

func writeMachine(w io.Writer, m *machine.Machine) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"Name", m.Name}, {"ID", m.ID}, {"State", string(m.State)}, {"Recipe", m.Recipe},
		{"MACs", strings.Join(m.MACs, ", ")}, {"Serial", m.Serial}, {"System UUID", m.SystemUUID},
		{"BMC", m.BMC.Endpoint}, {"BMC credential", m.BMC.CredentialRef}, {"IPv4", m.IPv4},
		{"Rack", m.Rack}, {"Location", m.Location}, {"Created", tableTime(m.Created)}, {"Updated", tableTime(m.Updated)},
	} {
		if kv[1] == "" {
			kv[1] = "-"
		}
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	tw.Flush()
}

func runMachineRm(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine rm", "machine rm NODE")
	sf := addStoreCLIFlags(fs)
	node, err := parseNode(e, fs, sf, "machine rm", args)
	if err != nil {
		return helpOK(err)
	}
	st, m, err := sf.openMachine(ctx, node)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.DeleteMachine(ctx, m.ID); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "removed %s (%s) with its inventory and events\n", m.Name, m.ID)
	return nil
}

func runMachineSetRecipe(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine set-recipe", "machine set-recipe NODE RECIPE [--recipes DIR]")
	sf := addStoreCLIFlags(fs)
	recipes := fs.String("recipes", "recipes", "folder holding RECIPE.yaml files")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos, "NODE", "RECIPE"); err != nil {
		return fmt.Errorf("machine set-recipe: %w", err)
	}
	if err := checkRecipeFile(*recipes, pos[1]); err != nil {
		return fmt.Errorf("machine set-recipe: %w", err)
	}
	st, err := sf.open(false)
	if err != nil {
		return err
	}
	defer st.Close()
	var old string
	m, err := st.UpdateMachine(ctx, pos[0], func(m *machine.Machine) error {
		old = m.Recipe
		m.Recipe = pos[1]
		return nil
	})
	if err != nil {
		return err
	}
	from := old
	if from == "" {
		from = "(none)"
	}
	_, err = st.AppendEvent(ctx, machine.Event{Machine: m.ID, Actor: operatorActor(e), Kind: "recipe",
		Message: fmt.Sprintf("recipe %s -> %s", from, m.Recipe), Fields: map[string]string{"from": old, "to": m.Recipe}})
	if err != nil {
		return err
	}
	if sf.output == "json" {
		return e.printJSON(m)
	}
	fmt.Fprintf(e.stdout, "%s: recipe %s -> %s\n", m.Name, from, m.Recipe)
	return nil
}

// cliTable writes aligned columns with text/tabwriter.
type cliTable struct{ tw *tabwriter.Writer }

func newCLITable(w io.Writer, header ...string) *cliTable {
	t := &cliTable{tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *cliTable) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *cliTable) flush() error { return t.tw.Flush() }

// tableTime formats a time for tables: UTC, to the second.
func tableTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}
