package firmware

import (
	"strings"
	"testing"
	"time"
)

// TestParseWindow: each way an operator writes a window, and what is wrong
// with the ones that are not windows.
func TestParseWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		in, want, err string
	}{
		"every day":         {in: "02:00-06:00", want: "02:00+4h0m0s"},
		"across midnight":   {in: "22:00-04:00", want: "22:00+6h0m0s"},
		"length":            {in: "recipe=gpu 02:00+90m", want: "recipes=gpu 02:00+1h30m0s"},
		"racks, days, zone": {in: "racks=r1,r2 days=sat,Sunday 22:00-04:00 tz=Europe/Berlin", want: "racks=r1,r2 days=sat,sun 22:00+6h0m0s tz=Europe/Berlin"},
		"no time":           {in: "racks=r1", err: "expected a time of day"},
		"two times":         {in: "01:00-02:00 03:00-04:00", err: "two times of day"},
		"bad hour":          {in: "25:00-02:00", err: "expected a time of day HH:MM"},
		"bad day":           {in: "days=someday 01:00-02:00", err: `"someday": expected mon`},
		"bad key":           {in: "rackz=1 01:00-02:00", err: `unknown key "rackz"`},
		"empty racks":       {in: "racks= 01:00-02:00", err: "expected at least one name"},
		"too long":          {in: "01:00+25h", err: "length of up to 24h"},
		"bad zone":          {in: "01:00-02:00 tz=Mars/Olympus", err: "tz=Mars/Olympus"},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := ParseWindow(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseWindow(%q) = %v, %v; want an error with %q", tc.in, w, err, tc.err)
				}
				return
			}
			if err != nil || w.String() != tc.want {
				t.Fatalf("ParseWindow(%q) = %q, %v; want %q", tc.in, w.String(), err, tc.want)
			}
			back, err := ParseWindow(w.String())
			if err != nil || back.String() != w.String() {
				t.Errorf("round trip %q = %q, %v", w.String(), back.String(), err)
			}
		})
	}
	w, _ := ParseWindow("days=sat 22:00-04:00 tz=Europe/Berlin")
	// Saturday 23:30 in Berlin is inside; Sunday 03:00 too (the window
	// began Saturday); Sunday 23:00 is not.
	for _, c := range []struct {
		at   time.Time
		open bool
	}{
		{time.Date(2026, 11, 28, 23, 30, 0, 0, berlin), true},
		{time.Date(2026, 11, 29, 3, 0, 0, 0, berlin), true},
		{time.Date(2026, 11, 29, 23, 0, 0, 0, berlin), false},
	} {
		if open, _ := w.open(c.at); open != c.open {
			t.Errorf("window %s at %s: open %v, want %v", w, c.at, open, c.open)
		}
	}
}

// FuzzParseWindow: an operator's window string never panics, and what
// parses writes back to itself.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"02:00-06:00", "racks=r1,r2 days=sat,sun 22:00-04:00 tz=UTC", "recipe=x 01:00+3h", "=", "1:1-1:1", "days=,,, 00:00+1ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWindow(s)
		if err != nil {
			return
		}
		back, err := ParseWindow(w.String())
		if err != nil || back.String() != w.String() {
			t.Errorf("%q: wrote %q, read back %q, %v", s, w.String(), back.String(), err)
		}
	})
}
