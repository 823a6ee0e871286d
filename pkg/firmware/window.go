package firmware

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseWindow reads a maintenance window as an operator writes it on the
// command line: space-separated words, one of them the time of day
// (HH:MM-HH:MM, crossing midnight when the end is not after the start, or
// HH:MM+DURATION), the others key=value: racks=R1,R2 and recipes=A,B (the
// nodes it covers; neither: every node), days=sat,sun (default every
// day), tz=Europe/Berlin (default UTC).
//
//	racks=rack-1,rack-2 days=sat,sun 22:00-04:00 tz=Europe/Berlin
//	recipe=gpu-a100 02:00+3h
func ParseWindow(s string) (Window, error) {
	var w Window
	seen := false
	for _, word := range strings.Fields(s) {
		k, v, ok := strings.Cut(word, "=")
		if !ok {
			if seen {
				return w, fmt.Errorf("maintenance window %q: two times of day (%q): expected one, HH:MM-HH:MM or HH:MM+DURATION", s, word)
			}
			if err := w.parseTime(word); err != nil {
				return w, fmt.Errorf("maintenance window %q: %w", s, err)
			}
			seen = true
			continue
		}
		if err := w.parseKey(k, v); err != nil {
			return w, fmt.Errorf("maintenance window %q: %w", s, err)
		}
	}
	if !seen {
		return w, fmt.Errorf("maintenance window %q: expected a time of day, HH:MM-HH:MM or HH:MM+DURATION (22:00-04:00, 02:00+3h)", s)
	}
	return w, Limits{Windows: []Window{w}}.check()
}

func (w *Window) parseKey(k, v string) error {
	list := func() []string {
		var out []string
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	switch k {
	case "rack", "racks", "recipe", "recipes":
		names := list()
		if len(names) == 0 {
			return fmt.Errorf("%s=: expected at least one name", k)
		}
		if strings.HasPrefix(k, "rack") {
			w.Racks = append(w.Racks, names...)
		} else {
			w.Recipes = append(w.Recipes, names...)
		}
	case "day", "days":
		for _, d := range list() {
			wd, ok := weekday(d)
			if !ok {
				return fmt.Errorf("days: %q: expected mon, tue, wed, thu, fri, sat or sun", d)
			}
			w.Days = append(w.Days, wd)
		}
	case "tz":
		loc, err := time.LoadLocation(v)
		if err != nil {
			return fmt.Errorf("tz=%s: %w", v, err)
		}
		w.Location = loc
	default:
		return fmt.Errorf("unknown key %q: expected racks=, recipes=, days= or tz=", k)
	}
	return nil
}

// parseTime reads HH:MM-HH:MM or HH:MM+DURATION.
func (w *Window) parseTime(s string) error {
	if from, d, ok := strings.Cut(s, "+"); ok {
		start, err := clock(from)
		if err != nil {
			return err
		}
		length, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("length %q: %w", d, err)
		}
		w.Start, w.Length = start, length
		return nil
	}
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return fmt.Errorf("%q: expected HH:MM-HH:MM or HH:MM+DURATION", s)
	}
	start, err := clock(from)
	if err != nil {
		return err
	}
	end, err := clock(to)
	if err != nil {
		return err
	}
	w.Start, w.Length = start, end-start
	if end <= start {
		w.Length += 24 * time.Hour
	}
	return nil
}

// clock reads HH:MM as the time since midnight.
func clock(s string) (time.Duration, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, herr := strconv.Atoi(h)
	mm, merr := strconv.Atoi(m)
	if !ok || herr != nil || merr != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 || len(m) != 2 {
		return 0, fmt.Errorf("%q: expected a time of day HH:MM (00:00 to 23:59)", s)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}

var weekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

func weekday(s string) (time.Weekday, bool) {
	s = strings.ToLower(s)
	if len(s) >= 3 {
		if i := slices.Index(weekdays, s[:3]); i >= 0 && strings.HasPrefix(strings.ToLower(time.Weekday(i).String()), s) {
			return time.Weekday(i), true
		}
	}
	return 0, false
}

// String writes the window as ParseWindow reads it.
func (w Window) String() string {
	var parts []string
	if len(w.Racks) > 0 {
		parts = append(parts, "racks="+strings.Join(w.Racks, ","))
	}
	if len(w.Recipes) > 0 {
		parts = append(parts, "recipes="+strings.Join(w.Recipes, ","))
	}
	if len(w.Days) > 0 {
		var ds []string
		for _, d := range w.Days {
			ds = append(ds, weekdays[d])
		}
		parts = append(parts, "days="+strings.Join(ds, ","))
	}
	parts = append(parts, fmt.Sprintf("%02d:%02d+%s", int(w.Start.Hours()), int(w.Start.Minutes())%60, w.Length))
	if w.Location != nil && w.Location != time.UTC {
		parts = append(parts, "tz="+w.Location.String())
	}
	return strings.Join(parts, " ")
}
