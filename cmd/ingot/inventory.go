package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/machine"
)

const inventoryUsage = `Usage: ingot inventory show NODE [--history] [--diff [A B]]

  show NODE             the latest inventory snapshot
  show NODE --history   every kept snapshot, one line each
  show NODE --diff      what changed from the previous snapshot to the latest
  show NODE --diff A B  what changed from snapshot A to snapshot B (sequence numbers)

Flags: --server, --token-file, --context (see 'ingot config'), -o table|json|yaml.
`

// runInventory dispatches `ingot inventory show`.
func runInventory(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, inventoryUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	if args[0] != "show" {
		fmt.Fprintf(e.stderr, "ingot inventory: unknown command %q\n\n%s", args[0], inventoryUsage)
		return errUsage
	}
	fs := e.flagSet("inventory show", "inventory show NODE [--history] [--diff [A B]]")
	af := addAPIFlags(fs)
	history := fs.Bool("history", false, "list every kept snapshot")
	diff := fs.Bool("diff", false, "show changes between two snapshots: A B, or the previous and the latest")
	pos, err := parseWithArgs(e, fs, args[1:])
	if err != nil {
		return helpOK(err)
	}
	switch {
	case *history && *diff:
		return errors.New("inventory show: --history and --diff: expected at most one of them")
	case *diff && len(pos) != 1 && len(pos) != 3:
		fs.Usage()
		return fmt.Errorf("inventory show --diff: expected NODE or NODE A B, got %q", pos)
	case !*diff:
		if err := wantArgs(fs, pos, "NODE"); err != nil {
			return fmt.Errorf("inventory show: %w", err)
		}
	}
	seqs := make([]uint64, 2)
	for i, name := range []string{"A", "B"} {
		if len(pos) == 3 {
			v, err := strconv.ParseUint(pos[1+i], 10, 64)
			if err != nil || v == 0 {
				return fmt.Errorf("inventory show --diff: %s %q: expected a snapshot sequence number (see --history)", name, pos[1+i])
			}
			seqs[i] = v
		}
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("inventory show: %w", err)
	}
	switch {
	case *history:
		return inventoryHistory(ctx, e, c, pos[0], af.output)
	case *diff:
		return inventoryDiff(ctx, e, c, pos[0], seqs, af.output)
	}
	snap, err := c.Inventory(ctx, pos[0], 0)
	if err != nil {
		return fmt.Errorf("inventory show: %w", err)
	}
	return e.render(af.output, snap, func() error { return writeInventorySummary(e.stdout, snap) })
}

func inventoryHistory(ctx context.Context, e *env, c *client.Client, node, output string) error {
	snaps, err := c.History(ctx, node)
	if err != nil {
		return fmt.Errorf("inventory show --history: %w", err)
	}
	return e.render(output, snaps, func() error {
		if len(snaps) == 0 {
			fmt.Fprintf(e.stdout, "no inventory for %s\n", node)
			return nil
		}
		t := newCLITable(e.stdout, "SEQ", "TAKEN", "SOURCE", "CPUS", "MEMORY", "DIMMS", "GPUS", "DISKS", "PSUS", "PROBLEMS")
		for _, s := range snaps {
			inv := s.Inventory
			t.row(fmt.Sprint(s.Seq), tableTime(s.Taken), inv.Source, fmt.Sprint(len(inv.CPUs)), invMemory(inv.DIMMs),
				fmt.Sprint(len(inv.DIMMs)), fmt.Sprint(len(inv.GPUs)), fmt.Sprint(len(inv.Disks)), fmt.Sprint(len(inv.PSUs)),
				fmt.Sprint(len(inv.Problems)))
		}
		return t.flush()
	})
}

func inventoryDiff(ctx context.Context, e *env, c *client.Client, node string, seqs []uint64, output string) error {
	d, err := c.Diff(ctx, node, seqs[0], seqs[1])
	if err != nil {
		return fmt.Errorf("inventory show --diff: %w", err)
	}
	return e.render(output, d, func() error {
		fmt.Fprintf(e.stdout, "%s: snapshot %d (%s) -> %d (%s): %d change(s)\n", d.Machine, d.From.Seq, tableTime(d.From.Taken),
			d.To.Seq, tableTime(d.To.Taken), len(d.Changes))
		if len(d.Changes) == 0 {
			return nil
		}
		t := newCLITable(e.stdout, "PATH", "FROM", "TO")
		for _, ch := range d.Changes {
			t.row(ch.Path, ch.From, ch.To)
		}
		return t.flush()
	})
}

// writeInventorySummary prints one snapshot for people: a header, then a
// section per kind of part.
func writeInventorySummary(w io.Writer, s *wire.Snapshot) error {
	inv := s.Inventory
	sys := inv.System
	fmt.Fprintf(w, "Snapshot %d from %s, taken %s\n", s.Seq, inv.Source, tableTime(s.Taken))
	fmt.Fprintf(w, "System:   %s\n", invJoin(strings.TrimSpace(sys.Vendor+" "+sys.Model), invLabeled("serial", sys.Serial),
		invLabeled("BIOS", sys.BIOSVersion), invLabeled("BMC", sys.BMCVersion), invLabeled("power", sys.PowerState)))
	if len(inv.CPUs) > 0 {
		c := inv.CPUs[0]
		fmt.Fprintf(w, "CPUs:     %d x %s (%s)\n", len(inv.CPUs), dash(c.Model), dash(invUnit(c.Cores, "cores")))
	}
	if len(inv.DIMMs) > 0 {
		fmt.Fprintf(w, "Memory:   %s in %d DIMMs\n", invMemory(inv.DIMMs), len(inv.DIMMs))
	}
	if inv.Power.Watts > 0 {
		fmt.Fprintf(w, "Power:    %d W\n", inv.Power.Watts)
	}
	section := func(title string, n int, header []string, rows func(t *cliTable)) error {
		if n == 0 {
			return nil
		}
		fmt.Fprintf(w, "%s (%d):\n", title, n)
		header[0] = "  " + header[0]
		t := newCLITable(w, header...)
		rows(t)
		return t.flush()
	}
	err := errors.Join(
		section("GPUs", len(inv.GPUs), []string{"SLOT", "MODEL", "VRAM", "LINK", "MAX", "SERIAL", "FIRMWARE", "HEALTH"}, func(t *cliTable) {
			for _, g := range inv.GPUs {
				t.row("  "+dash(g.Slot), g.Model, invMiB(g.VRAMMiB), invLink(g.LinkCurrent), invLink(g.LinkMax), g.Serial, g.Firmware, g.Health)
			}
		}),
		section("NICs", len(inv.NICs), []string{"NAME", "MAC", "MODEL", "SPEED", "LINK", "FIRMWARE"}, func(t *cliTable) {
			for _, n := range inv.NICs {
				link := "down"
				if n.LinkUp {
					link = "up"
				}
				t.row("  "+dash(n.Name), n.MAC, n.Model, invSpeed(n.SpeedMbps), link, n.Firmware)
			}
		}),
		section("Disks", len(inv.Disks), []string{"NAME", "MODEL", "SIZE", "MEDIA", "SERIAL", "HEALTH"}, func(t *cliTable) {
			for _, d := range inv.Disks {
				t.row("  "+dash(d.Name), d.Model, invGB(d.SizeBytes), d.Media, d.Serial, d.Health)
			}
		}),
		section("PSUs", len(inv.PSUs), []string{"NAME", "MODEL", "RATED", "STATE", "HEALTH"}, func(t *cliTable) {
			for _, p := range inv.PSUs {
				t.row("  "+dash(p.Name), p.Model, invUnit(p.RatedWatts, "W"), p.State, p.Health)
			}
		}),
		section("Firmware", len(inv.Firmware), []string{"COMPONENT", "VERSION"}, func(t *cliTable) {
			for _, f := range inv.Firmware {
				t.row("  "+dash(f.Component), f.Version)
			}
		}),
		section("Problems", len(inv.Problems), []string{"PART", "DETAIL"}, func(t *cliTable) {
			for _, p := range inv.Problems {
				t.row("  "+dash(p.Part), p.Detail)
			}
		}),
	)
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func invMemory(ds []machine.DIMM) string {
	var mib int64
	for _, d := range ds {
		mib += d.SizeMiB
	}
	return invMiB(mib)
}

func invMiB(mib int64) string {
	switch {
	case mib == 0:
		return ""
	case mib%1024 == 0:
		return strconv.FormatInt(mib/1024, 10) + " GiB"
	}
	return strconv.FormatInt(mib, 10) + " MiB"
}

func invGB(b int64) string {
	if b == 0 {
		return ""
	}
	return strconv.FormatInt(b/1e9, 10) + " GB"
}

func invLink(l machine.PCIeLink) string {
	return strings.TrimSpace(invPrefix("Gen", l.Gen) + " " + invPrefix("x", l.Width))
}

func invSpeed(mbps int) string {
	if mbps >= 1000 && mbps%1000 == 0 {
		return invUnit(mbps/1000, "Gb/s")
	}
	return invUnit(mbps, "Mb/s")
}

func invPrefix(p string, v int) string {
	if v == 0 {
		return ""
	}
	return p + strconv.Itoa(v)
}

func invUnit(v int, unit string) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v) + " " + unit
}

func invLabeled(label, v string) string {
	if v == "" {
		return ""
	}
	return label + " " + v
}

func invJoin(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}
