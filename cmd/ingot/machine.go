package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/machine"
)

const machineUsage = `Usage: ingot machine COMMAND

Commands:
  add NAME --mac MAC [--mac MAC2] [--serial S] [--bmc URL] [--bmc-cred REF] [--bmc-insecure]
      [--recipe R] [--rack R] [--index N] [--location L] [--ip A]
                      enroll a machine (state: enrolled)
  ls [--recipe R] [--state S] [--rack R] [--limit N] [--after NAME]
                      list machines
  show NODE           a machine, its last events and latest inventory
  rm NODE             forget a machine, its inventory and events
  set-recipe NODE RECIPE
                      assign a recipe ("" unassigns); refused while a job runs
  inspect NODE        the server reads the machine's inventory from its BMC
  waive NODE CHECK --reason TEXT
                      let one machine past one failed check
  unwaive NODE CHECK  withdraw it
  drill-candidate NODE [--off]
                      a restore drill (ingot drill) may wipe this machine

NODE is a machine's name or ID. Every command talks to a running server
(--server, --token-file, --context; see 'ingot config') and takes
-o table|json|yaml. Without a server: 'ingot admin'.
`

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
		"add":             runMachineAdd,
		"ls":              runMachineLs,
		"show":            runMachineShow,
		"rm":              runMachineRm,
		"set-recipe":      runMachineSetRecipe,
		"drill-candidate": runMachineDrillCandidate,
		"inspect":         runMachineInspect,
		"waive":           runMachineWaive,
		"unwaive":         runMachineUnwaive,
	}[args[0]]
	if sub == nil {
		fmt.Fprintf(e.stderr, "ingot machine: unknown command %q\n\n%s", args[0], machineUsage)
		return errUsage
	}
	return sub(ctx, e, args[1:])
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

// helpOK turns "help was shown" into success.
func helpOK(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// parseNode parses the flags and the one NODE argument of a command and
// builds its API client; cmd prefixes its errors.
func parseNode(e *env, fs *flag.FlagSet, af *apiFlags, cmd string, args []string) (string, *client.Client, error) {
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return "", nil, err
	}
	if err := wantArgs(fs, pos, "NODE"); err != nil {
		return "", nil, fmt.Errorf("%s: %w", cmd, err)
	}
	c, err := af.client(e)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return pos[0], c, nil
}

func runMachineAdd(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine add", "machine add NAME --mac MAC [--mac MAC2] [--serial S] [--bmc URL] [--bmc-cred REF] [--bmc-insecure] [--recipe R] [--rack R] [--index N] [--location L] [--ip A]")
	af := addAPIFlags(fs)
	var macs repeatedFlag
	fs.Var(&macs, "mac", "MAC address of a boot NIC (repeat for more)")
	serial := fs.String("serial", "", "system serial number")
	bmc := fs.String("bmc", "", "BMC Redfish endpoint, e.g. https://10.0.0.5")
	bmcCred := fs.String("bmc-cred", "", "BMC credential reference on the server: file:/etc/ingot/bmc/NODE or env:INGOT_BMC_NODE (inside the server's --bmc-credentials-dir / --bmc-credential-env-prefix)")
	insecure := fs.Bool("bmc-insecure", false, "the link to this BMC protects nothing: skip TLS verification and allow a plain http:// endpoint (a lab, an isolated management network); without it a credential is never sent over http")
	recipeName := fs.String("recipe", "", "recipe (server class) to assign")
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
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("machine add: %w", err)
	}
	m, err := c.Enroll(ctx, machine.Machine{Name: pos[0], MACs: macs, Serial: *serial, Rack: *rack, Index: *index,
		Location: *location, Recipe: *recipeName, IPv4: *ip, BMC: machine.BMC{Endpoint: *bmc, CredentialRef: *bmcCred, Insecure: *insecure}})
	if err != nil {
		return fmt.Errorf("machine add: %w", err)
	}
	return e.render(af.output, m, func() error {
		fmt.Fprintf(e.stdout, "enrolled %s (%s)\n", m.Name, m.ID)
		return nil
	})
}

func runMachineLs(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine ls", "machine ls [--recipe R] [--state S] [--rack R] [--limit N] [--after NAME]")
	af := addAPIFlags(fs)
	o := client.ListOptions{}
	fs.StringVar(&o.Recipe, "recipe", "", "only machines with this recipe")
	fs.StringVar(&o.State, "state", "", "only machines in this state")
	fs.StringVar(&o.Rack, "rack", "", "only machines in this rack")
	fs.IntVar(&o.Limit, "limit", 0, "show at most N (0: all); the next page starts at --after, printed on stderr")
	fs.StringVar(&o.After, "after", "", "start after this machine name (the next page)")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos); err != nil {
		return fmt.Errorf("machine ls: %w", err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("machine ls: %w", err)
	}
	ms, next, err := listMachines(ctx, c, o)
	if err != nil {
		return fmt.Errorf("machine ls: %w", err)
	}
	if next != "" {
		fmt.Fprintf(e.stderr, "more: ingot machine ls --limit %d --after %s\n", o.Limit, next)
	}
	return e.render(af.output, ms, func() error { return writeMachineTable(e, ms) })
}

func writeMachineTable(e *env, ms []machine.Machine) error {
	tw := newCLITable(e.stdout, "NAME", "ID", "STATE", "RECIPE", "MACS", "BMC", "RACK", "UPDATED")
	for _, m := range ms {
		tw.row(m.Name, m.ID, string(m.State), m.Recipe, strings.Join(m.MACs, ","), m.BMC.Endpoint, m.Rack, tableTime(m.Updated))
	}
	return tw.flush()
}

// listMachines returns one page when o.Limit is set, else every machine,
// paging through the server's list 500 at a time.
func listMachines(ctx context.Context, c *client.Client, o client.ListOptions) ([]machine.Machine, string, error) {
	if o.Limit > 0 {
		return c.Machines(ctx, o)
	}
	all := []machine.Machine{}
	o.Limit = 500
	for {
		page, next, err := c.Machines(ctx, o)
		if err != nil {
			return nil, "", err
		}
		all = append(all, page...)
		if next == "" {
			return all, "", nil
		}
		o.After = next
	}
}

// machineView is `machine show -o json`.
type machineView struct {
	Machine   *machine.Machine `json:"machine"`
	Revision  uint64           `json:"revision"` // for set-recipe --if-match
	Events    []machine.Event  `json:"events"`
	Inventory *wire.Snapshot   `json:"inventory"`
}

func runMachineShow(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine show", "machine show NODE")
	af := addAPIFlags(fs)
	node, c, err := parseNode(e, fs, af, "machine show", args)
	if err != nil {
		return helpOK(err)
	}
	m, rev, err := c.MachineRev(ctx, node)
	if err != nil {
		return fmt.Errorf("machine show: %w", err)
	}
	evs, err := c.LastEvents(ctx, m.ID, 5)
	if err != nil {
		return fmt.Errorf("machine show: %w", err)
	}
	snap, err := c.Inventory(ctx, m.ID, 0)
	if client.StatusOf(err) == 404 {
		snap, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("machine show: %w", err)
	}
	return e.render(af.output, machineView{Machine: m, Revision: rev, Events: evs, Inventory: snap}, func() error {
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
	})
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
	af := addAPIFlags(fs)
	node, c, err := parseNode(e, fs, af, "machine rm", args)
	if err != nil {
		return helpOK(err)
	}
	if err := c.DeleteMachine(ctx, node); err != nil {
		return fmt.Errorf("machine rm: %w", err)
	}
	fmt.Fprintf(e.stdout, "removed %s with its inventory and events\n", node)
	return nil
}

func runMachineSetRecipe(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine set-recipe", "machine set-recipe NODE RECIPE [--if-match REV]")
	af := addAPIFlags(fs)
	rev := fs.Uint64("if-match", 0, "only if the machine is still at this revision (machine show -o json prints it); 0: unconditional")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos, "NODE", "RECIPE"); err != nil {
		return fmt.Errorf("machine set-recipe: %w", err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("machine set-recipe: %w", err)
	}
	m, err := c.SetRecipe(ctx, pos[0], pos[1], *rev)
	if err != nil {
		return fmt.Errorf("machine set-recipe: %w", err)
	}
	return e.render(af.output, m, func() error {
		fmt.Fprintf(e.stdout, "%s: recipe %s\n", m.Name, firstNonEmpty(m.Recipe, "(none)"))
		return nil
	})
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
