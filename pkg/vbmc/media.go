package vbmc

import (
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
