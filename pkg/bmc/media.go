package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/schemas"
)

// virtualMedia lists the CD/DVD virtual media slots: those under the
// Managers first, then those under the System (DMTF rackmount1 keeps them
// there).
func (c *Client) virtualMedia(ctx context.Context, op string) ([]*schemas.VirtualMedia, error) {
	api, err := c.gf(ctx)
	if err != nil {
		return nil, err
	}
	var all []*schemas.VirtualMedia
	mgrs, _ := api.Service.Managers()
	for _, m := range mgrs {
		vm, _ := m.VirtualMedia()
		all = append(all, vm...)
	}
	if sys, err := c.system(ctx); err == nil {
		vm, _ := sys.VirtualMedia()
		all = append(all, vm...)
	}
	var cds []*schemas.VirtualMedia
	for _, v := range all {
		if len(v.MediaTypes) == 0 || slices.Contains(v.MediaTypes, schemas.CDVirtualMediaType) ||
			slices.Contains(v.MediaTypes, schemas.DVDVirtualMediaType) {
			cds = append(cds, v)
		}
	}
	if len(cds) == 0 {
		return nil, &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: op,
			Err: fmt.Errorf("%w: no CD/DVD VirtualMedia under the Managers or the System (%d slots of other types)", errNoMedia, len(all))}
	}
	return cds, nil
}

// InsertMedia attaches image (an http(s) URL of an ISO) to the first CD/DVD
// virtual media slot. gofish falls back to PATCH where the InsertMedia action
// is missing (Lenovo XCC, DMTF rackmount1).
func (c *Client) InsertMedia(ctx context.Context, image string) error {
	op := "inserting virtual media " + image
	cds, err := c.virtualMedia(ctx, op)
	if err != nil {
		return err
	}
	t := true
	_, err = cds[0].InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: image, Inserted: &t, WriteProtected: &t})
	var be *Error
	if err != nil && errors.As(err, &be) && c.quirk(ctx, QuirkIDRAC10Media, facts{status: be.Status, messages: be.Messages}) {
		// Dell iDRAC 10 refuses Inserted and WriteProtected: Image and the
		// transfer protocol alone.
		err = c.insertMediaPlain(ctx, cds[0], image)
	}
	return c.wrap(fmt.Sprintf("%s into %s", op, cds[0].ODataID), err)
}

// insertMediaPlain posts InsertMedia with Image and TransferProtocolType
// only (QuirkIDRAC10Media).
func (c *Client) insertMediaPlain(ctx context.Context, v *schemas.VirtualMedia, image string) error {
	target := actionTarget(v.RawData, "#VirtualMedia.InsertMedia")
	if target == "" {
		return &Error{Kind: KindUnsupported, Endpoint: c.cfg.Endpoint, Op: "inserting virtual media",
			Err: fmt.Errorf("%s has no InsertMedia action", v.ODataID)}
	}
	api, err := c.gf(ctx)
	if err != nil {
		return err
	}
	proto := "HTTP"
	if strings.HasPrefix(strings.ToLower(image), "https://") {
		proto = "HTTPS"
	}
	resp, err := api.Post(target, map[string]any{"Image": image, "TransferProtocolType": proto})
	closeBody(resp)
	return err
}

// actionTarget reads Actions[name].target from a resource's raw JSON.
func actionTarget(raw []byte, name string) string {
	var doc struct {
		Actions map[string]struct {
			Target string `json:"target"`
		} `json:"Actions"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return ""
	}
	return doc.Actions[name].Target
}

// EjectMedia ejects every inserted CD/DVD virtual media.
func (c *Client) EjectMedia(ctx context.Context) error {
	const op = "ejecting virtual media"
	cds, err := c.virtualMedia(ctx, op)
	if err != nil {
		return err
	}
	for _, v := range cds {
		if v.Inserted != nil && !*v.Inserted && v.Image == "" {
			continue
		}
		if _, err := v.EjectMedia(); err != nil {
			return c.wrap(fmt.Sprintf("%s %s", op, v.ODataID), err)
		}
	}
	return nil
}
