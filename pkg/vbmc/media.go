package vbmc

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// Virtual media exists only where the mockup has VirtualMedia resources
// (under a Manager or a System); elsewhere the URIs are 404, as on a BMC
// without the feature. The InsertMedia/EjectMedia actions are accepted only
// where the resource advertises them (Gigabyte/AMI); the DMTF mockups
// advertise none, so there a client must PATCH Image/Inserted, as gofish
// does — which is exactly the fallback a client needs to be tested on.
//
// Where the Backend is a MediaBackend (the QEMU backend), what is inserted
// reaches the machine: the image is in its CD drive from the next power-on,
// and a one-time boot override "Cd" boots it.

// MediaBackend is a Backend with a CD drive behind the BMC's virtual media.
// The BMC has one drive for the System it powers: an image inserted into
// any of its CD/DVD slots goes into it, replacing what was there.
type MediaBackend interface {
	Backend
	// InsertMedia puts the image at the URL into the drive from the next
	// power-on. It MUST return at once (the BMC holds its lock): fetch
	// the image at power-on, not here. An error refuses the insert (a URL
	// the machine cannot read), and the BMC answers 400 with it.
	InsertMedia(ctx context.Context, image string) error
	// EjectMedia empties the drive from the next power-on.
	EjectMedia(ctx context.Context) error
}

// feedDrive tells a MediaBackend what is now in its drive ("": nothing)
// and records it in the event log. b.mu held.
func (b *BMC) feedDrive(ctx context.Context, slot, image string) error {
	mb, ok := b.cfg.Backend.(MediaBackend)
	if ok && b.powered != "" {
		var err error
		if image == "" {
			err = mb.EjectMedia(ctx)
		} else {
			err = mb.InsertMedia(ctx, image)
		}
		if err != nil {
			return err
		}
	}
	if image == "" {
		b.event("VirtualMediaEjected", "Drive Slot/Bay", "Virtual media was ejected from %s.", slot)
		b.log.Info("virtual media ejected", "slot", slot)
		return nil
	}
	b.event("VirtualMediaInserted", "Drive Slot/Bay", "Virtual media %s was inserted into %s.", image, slot)
	b.log.Info("virtual media inserted", "slot", slot, "image", image)
	return nil
}

// msgMediaRefused is an image the machine could not be given.
func msgMediaRefused(image, prop string, err error) message {
	return message{"Base.1.0.PropertyValueFormatError",
		fmt.Sprintf("The value %s for the property %s is of a different format than the property can accept: %v.", image, prop, err),
		[]string{image, prop}, "Warning", "Give the URL of an image the BMC can fetch (http or https) and resubmit the request."}
}

// mediaAction handles POST .../VirtualMedia/ID/Actions/VirtualMedia.{InsertMedia,EjectMedia}.
func (b *BMC) mediaAction(w http.ResponseWriter, r *http.Request, p string) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, msgMalformed(err))
		return
	}
	name := path.Base(p) // VirtualMedia.InsertMedia
	vm := strings.TrimSuffix(p, "/Actions/"+name)
	b.mu.Lock()
	defer b.mu.Unlock()
	doc, ok := b.peek(vm)
	if !ok || !typeIs(doc, "VirtualMedia") {
		writeError(w, http.StatusNotFound, msgMissing(p))
		return
	}
	if _, ok := action(doc, "#"+name); !ok {
		writeError(w, http.StatusBadRequest, msgActionNotSupported(name))
		return
	}
	change := map[string]any{"Image": nil, "ImageName": nil, "Inserted": false, "ConnectedVia": "NotConnected"}
	if name == "VirtualMedia.InsertMedia" {
		img, ok := body["Image"].(string)
		if !ok || img == "" {
			writeError(w, http.StatusBadRequest, msgMissingParam("Image", name))
			return
		}
		wp, ok := body["WriteProtected"].(bool)
		if !ok {
			wp = true
		}
		ins, ok := body["Inserted"].(bool)
		if !ok {
			ins = true
		}
		change = map[string]any{"Image": img, "ImageName": path.Base(img), "Inserted": ins,
			"WriteProtected": wp, "ConnectedVia": "URI"}
	}
	drive, _ := change["Image"].(string)
	if change["Inserted"] != true {
		drive = ""
	}
	if err := b.feedDrive(r.Context(), vm, drive); err != nil {
		writeError(w, http.StatusBadRequest, msgMediaRefused(drive, "Image", err))
		return
	}
	d, _ := b.mutable(vm)
	for k, v := range change {
		d[k] = v
	}
	b.touch(vm)
	w.WriteHeader(http.StatusNoContent)
}

// patchMedia handles PATCH VirtualMedia/ID {Image, Inserted, WriteProtected}
// (the way gofish inserts media where no action is advertised).
func (b *BMC) patchMedia(p string, body map[string]any) (int, *message) {
	for k, v := range body {
		switch k {
		case "Image":
			if _, ok := v.(string); !ok && v != nil {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
		case "Inserted", "WriteProtected":
			if _, ok := v.(bool); !ok {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
		case "TransferMethod", "TransferProtocolType", "UserName", "Password":
		default:
			if !strings.HasPrefix(k, "@") {
				return http.StatusBadRequest, ptr(msgPropertyNotWritable(k))
			}
		}
	}
	if img, set := mediaChange(body); set {
		if err := b.feedDrive(context.Background(), p, img); err != nil {
			return http.StatusBadRequest, ptr(msgMediaRefused(img, "Image", err))
		}
	}
	d, _ := b.mutable(p)
	for _, k := range []string{"Image", "Inserted", "WriteProtected", "TransferMethod", "TransferProtocolType"} {
		if v, ok := body[k]; ok {
			d[k] = v
		}
	}
	if img, ok := body["Image"].(string); ok && img != "" {
		d["ImageName"] = path.Base(img)
		d["ConnectedVia"] = "URI"
		if _, set := body["Inserted"]; !set {
			d["Inserted"] = true
		}
	} else if _, ok := body["Image"]; ok || body["Inserted"] == false {
		// Image null, or Inserted false alone (gofish's eject fallback): eject.
		d["Image"] = nil
		d["ImageName"] = nil
		d["Inserted"] = false
		d["ConnectedVia"] = "NotConnected"
	}
	b.touch(p)
	return 0, nil
}

// mediaChange is what a PATCH of a VirtualMedia does to the drive, as
// patchMedia applies it: an Image URL inserts it (unless Inserted is false),
// Image null or Inserted false alone ejects; set is false when the drive
// is left as it is (WriteProtected alone).
func mediaChange(body map[string]any) (image string, set bool) {
	img, isStr := body["Image"].(string)
	_, hasImage := body["Image"]
	switch {
	case isStr && img != "":
		if body["Inserted"] == false {
			return "", true
		}
		return img, true
	case hasImage || body["Inserted"] == false:
		return "", true
	}
	return "", false
}
