package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// runEvents prints a machine's event log: the newest N, or up to N after
// --since SEQ, oldest first.
func runEvents(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("events", "events NODE [--since SEQ] [-n N]")
	af := addAPIFlags(fs)
	since := fs.Uint64("since", 0, "only events after this sequence number (then -n counts from there)")
	n := fs.Int("n", 20, "how many events; 0 = all")
	node, c, err := parseNode(e, fs, af, "events", args)
	if err != nil {
		return helpOK(err)
	}
	if *n < 0 {
		return fmt.Errorf("events: -n %d: expected a count >= 0", *n)
	}
	var evs []machine.Event
	if *since > 0 || *n == 0 {
		evs, err = c.Events(ctx, node, *since, *n)
	} else {
		evs, err = c.LastEvents(ctx, node, *n)
	}
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return e.render(af.output, evs, func() error {
		if len(evs) == 0 {
			fmt.Fprintf(e.stdout, "no events for %s\n", node)
			return nil
		}
		if *n == 0 && *since == 0 && evs[0].Seq > 1 {
			// The whole log starts past seq 1: the store dropped the oldest
			// (it keeps a bounded number per machine); seqs are never reused.
			fmt.Fprintf(e.stderr, "%d older events of %s were dropped (the store keeps the newest per machine)\n", evs[0].Seq-1, node)
		}
		return writeEvents(e.stdout, evs)
	})
}

// writeEvents prints events as a table.
func writeEvents(w io.Writer, evs []machine.Event) error {
	t := newCLITable(w, "SEQ", "TIME", "ACTOR", "KIND", "DETAIL")
	for _, ev := range evs {
		t.row(fmt.Sprint(ev.Seq), tableTime(ev.Time), ev.Actor, ev.Kind, eventDetail(ev))
	}
	return t.flush()
}

// eventDetail is the message, a state transition and the fields, on one line.
func eventDetail(ev machine.Event) string {
	var parts []string
	if ev.From != "" || ev.To != "" {
		from := string(ev.From)
		if from == "" {
			from = "-"
		}
		parts = append(parts, from+" -> "+string(ev.To))
	}
	if ev.Message != "" {
		parts = append(parts, ev.Message)
	}
	keys := make([]string, 0, len(ev.Fields))
	for k := range ev.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, ev.Fields[k]))
	}
	return strings.Join(parts, "; ")
}
