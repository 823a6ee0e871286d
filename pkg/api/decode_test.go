package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecoders(t *testing.T) {
	tests := map[string]struct {
		decode func(string) error
		in     string
		bad    string
	}{
		"progress ok":         {progress, `{"step":"image","bytes":10,"total":20}`, ""},
		"progress negative":   {progress, `{"step":"image","bytes":-1}`, "negative"},
		"progress no step":    {progress, `{"bytes":1}`, "step is empty"},
		"progress two values": {progress, `{"step":"image"}{"step":"image"}`, "one JSON value"},
		"progress not json":   {progress, `step=image`, "decoding progress"},
		"checks ok":           {checks, `[{"name":"gpu-count","ok":true,"value":8}]`, ""},
		"checks no name":      {checks, `[{"ok":true}]`, "name is empty"},
		"checks ok+skipped":   {checks, `[{"name":"x","ok":true,"skipped":true}]`, "both"},
		"done ok":             {done, `{"step":"checks","ok":true,"image_sha256":"` + strings.Repeat("a", 64) + `"}`, ""},
		"done fail no reason": {done, `{"step":"image","ok":false}`, "reason is empty"},
		"done bad sha":        {done, `{"step":"image","ok":true,"image_sha256":"xyz"}`, "64 lowercase"},
		"log too big":         {logs, `{"lines":["` + strings.Repeat("x", MaxLogBytes) + `"]}`, "body over"},
		"firstboot ok":        {firstboot, `{"kernel":"6.1.0-40-amd64","drivers":{"nvidia":"535.309.01"}}`, ""},
		"firstboot no kernel": {firstboot, `{"os_release":"Debian"}`, "kernel is empty"},
		"inventory ok":        {inventory, `{"source":"agent","gpus":[{"model":"H100"}]}`, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.decode(tc.in)
			if (tc.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("err = %v, want %q", err, tc.bad)
			}
		})
	}
}

func progress(s string) error  { _, err := DecodeProgress(strings.NewReader(s)); return err }
func checks(s string) error    { _, err := DecodeChecks(strings.NewReader(s)); return err }
func done(s string) error      { _, err := DecodeDone(strings.NewReader(s)); return err }
func logs(s string) error      { _, err := DecodeLog(strings.NewReader(s)); return err }
func firstboot(s string) error { _, err := DecodeFirstBoot(strings.NewReader(s)); return err }
func inventory(s string) error { _, err := DecodeInventory(strings.NewReader(s)); return err }

// What the client sends, the server decoders accept.
func TestClientBodiesDecode(t *testing.T) {
	b, _ := json.Marshal(Done{Step: StepImage, OK: false, Reason: "sha256 mismatch"})
	if _, err := DecodeDone(strings.NewReader(string(b))); err != nil {
		t.Error(err)
	}
	b, _ = json.Marshal(Progress{Step: StepImage, Bytes: 1})
	if _, err := DecodeProgress(strings.NewReader(string(b))); err != nil {
		t.Error(err)
	}
}

func FuzzDecodeReports(f *testing.F) {
	f.Add(`{"step":"image","bytes":10,"total":20,"rate_bps":5}`)
	f.Add(`[{"name":"gpu-count","ok":true,"value":8}]`)
	f.Add(`{"step":"image","ok":false,"reason":"sha256 mismatch"}`)
	f.Add(`{"lines":["a","b"]}`)
	f.Add(`{"source":"agent","taken":"2026-01-02T03:04:05Z","gpus":[{"link_current":{"gen":5,"width":16}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := DecodeDone(strings.NewReader(s)); err == nil && (d.Step == "" || (!d.OK && d.Reason == "")) {
			t.Fatalf("accepted done %+v", d)
		}
		if p, err := DecodeProgress(strings.NewReader(s)); err == nil && (p.Bytes < 0 || p.Step == "") {
			t.Fatalf("accepted progress %+v", p)
		}
		DecodeChecks(strings.NewReader(s))
		DecodeLog(strings.NewReader(s))
		DecodeInventory(strings.NewReader(s))
		DecodeFirstBoot(strings.NewReader(s))
	})
}
