package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// ListOptions filters and pages a list. Limit 0 asks for everything.
type ListOptions struct {
	Recipe, State, Rack string // machines
	JobState            string // jobs
	Limit               int
	After               string // the Next of the page before
}

func (o ListOptions) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"recipe": o.Recipe, "state": o.State, "rack": o.Rack, "after": o.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.JobState != "" {
		q.Set("state", o.JobState)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func machinePath(id string, rest ...string) string {
	p := "/api/v1/machines/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Machines lists one page of machines, ordered by name; next is the After
// of the following page ("" on the last).
func (c *Client) Machines(ctx context.Context, o ListOptions) (ms []machine.Machine, next string, err error) {
	h, err := c.do(ctx, http.MethodGet, "/api/v1/machines"+o.query(), nil, &ms)
	return ms, h.Get("X-Ingot-Next"), err
}

// Machine returns a machine by name or ID.
func (c *Client) Machine(ctx context.Context, id string) (*machine.Machine, error) {
	var m machine.Machine
	_, err := c.do(ctx, http.MethodGet, machinePath(id), nil, &m)
	return &m, err
}

// Enroll adds a machine (state enrolled).
func (c *Client) Enroll(ctx context.Context, m machine.Machine) (*machine.Machine, error) {
	var out machine.Machine
	_, err := c.do(ctx, http.MethodPost, "/api/v1/machines", m, &out)
	return &out, err
}

// DeleteMachine forgets a machine (refused while a job holds it: 409).
func (c *Client) DeleteMachine(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, machinePath(id), nil, nil)
	return err
}

// SetRecipe assigns a recipe; "" unassigns. rev, when not 0, is the
// revision MachineRev read: the change fails with 412 when the machine
// changed since, so two operators cannot overwrite each other.
func (c *Client) SetRecipe(ctx context.Context, id, recipe string, rev uint64) (*machine.Machine, error) {
	var m machine.Machine
	h := http.Header{}
	if rev > 0 {
		h.Set("If-Match", fmt.Sprintf("%q", strconv.FormatUint(rev, 10)))
	}
	_, err := c.doHeader(ctx, http.MethodPut, machinePath(id, "recipe"), h, wire.SetRecipeRequest{Recipe: recipe}, &m)
	return &m, err
}

// MachineRev returns a machine with its revision (the ETag).
func (c *Client) MachineRev(ctx context.Context, id string) (*machine.Machine, uint64, error) {
	var m machine.Machine
	h, err := c.do(ctx, http.MethodGet, machinePath(id), nil, &m)
	if err != nil {
		return nil, 0, err
	}
	rev, _ := strconv.ParseUint(strings.Trim(h.Get("ETag"), `"`), 10, 64)
	return &m, rev, nil
}

// Inspect has the server read the machine's BMC inventory and judge it.
func (c *Client) Inspect(ctx context.Context, id string) (*wire.Inspection, error) {
	var out wire.Inspection
	_, err := c.do(ctx, http.MethodPost, machinePath(id, "inspect"), nil, &out)
	return &out, err
}

// Inventory returns snapshot seq of a machine (0: the latest).
func (c *Client) Inventory(ctx context.Context, id string, seq uint64) (*wire.Snapshot, error) {
	var out wire.Snapshot
	q := ""
	if seq > 0 {
		q = fmt.Sprintf("?seq=%d", seq)
	}
	_, err := c.do(ctx, http.MethodGet, machinePath(id, "inventory")+q, nil, &out)
	return &out, err
}

// History returns every kept snapshot of a machine, oldest first.
func (c *Client) History(ctx context.Context, id string) ([]wire.Snapshot, error) {
	var out []wire.Snapshot
	_, err := c.do(ctx, http.MethodGet, machinePath(id, "inventory")+"?history=1", nil, &out)
	return out, err
}

// Diff compares two snapshots (both 0: the previous and the latest).
func (c *Client) Diff(ctx context.Context, id string, from, to uint64) (*wire.InventoryDiff, error) {
	var out wire.InventoryDiff
	q := ""
	if from > 0 || to > 0 {
		q = fmt.Sprintf("?from=%d&to=%d", from, to)
	}
	_, err := c.do(ctx, http.MethodGet, machinePath(id, "inventory", "diff")+q, nil, &out)
	return &out, err
}

// Events returns a machine's events after seq since, at most limit (0: all).
func (c *Client) Events(ctx context.Context, id string, since uint64, limit int) ([]machine.Event, error) {
	var out []machine.Event
	_, err := c.do(ctx, http.MethodGet, machinePath(id, "events")+fmt.Sprintf("?since=%d&limit=%d", since, limit), nil, &out)
	return out, err
}

// LastEvents returns a machine's newest n events, oldest first.
func (c *Client) LastEvents(ctx context.Context, id string, n int) ([]machine.Event, error) {
	var out []machine.Event
	_, err := c.do(ctx, http.MethodGet, machinePath(id, "events")+fmt.Sprintf("?last=%d", n), nil, &out)
	return out, err
}

// Waive lets the machine past one failed check, with a reason.
func (c *Client) Waive(ctx context.Context, id, check, reason string) (*machine.Machine, error) {
	var m machine.Machine
	_, err := c.do(ctx, http.MethodPost, machinePath(id, "waivers"), wire.WaiverRequest{Check: check, Reason: reason}, &m)
	return &m, err
}

// Unwaive withdraws a waiver.
func (c *Client) Unwaive(ctx context.Context, id, check string) (*machine.Machine, error) {
	var m machine.Machine
	_, err := c.do(ctx, http.MethodDelete, machinePath(id, "waivers", url.PathEscape(check)), nil, &m)
	return &m, err
}
