package vbmc

import (
	"bytes"
	"net/http"
	"testing"
)

// FuzzParseImage: any pushed or fetched image parses or is refused,
// never panics.
func FuzzParseImage(f *testing.F) {
	f.Add(FirmwareImage(map[string]string{"BMC": "1.46.0", "NVIDIA A40": "94.02.74.00.01"}, "OnReset"))
	f.Add([]byte(`{"vbmc-firmware": {"versions": null}}`))
	f.Add([]byte("MZ\x90\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseImage(b)
		if err == nil && len(d.Firmware.Versions) == 0 {
			t.Error("accepted an image that brings nothing")
		}
	})
}

// FuzzReadMultipart: a multipart push body, whatever a client sends, is
// read or refused with a message, never panics.
func FuzzReadMultipart(f *testing.F) {
	body := "--b\r\nContent-Disposition: form-data; name=\"UpdateParameters\"\r\nContent-Type: application/json\r\n\r\n" +
		`{"Targets": ["/redfish/v1/UpdateService/FirmwareInventory/BMC"]}` +
		"\r\n--b\r\nContent-Disposition: form-data; name=\"UpdateFile\"; filename=\"fw.bin\"\r\n\r\nIMAGE\r\n--b--\r\n"
	f.Add("multipart/form-data; boundary=b", []byte(body))
	f.Add("multipart/form-data", []byte(body))
	f.Add("text/plain", []byte("x"))
	f.Fuzz(func(t *testing.T, ctype string, b []byte) {
		r, err := http.NewRequest(http.MethodPost, "/x", bytes.NewReader(b))
		if err != nil {
			return
		}
		r.Header.Set("Content-Type", ctype)
		img, _, _, msg := readMultipart(r)
		if msg == nil && img == nil {
			t.Error("no image and no refusal")
		}
	})
}
