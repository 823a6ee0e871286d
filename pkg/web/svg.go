package web

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// Charts are SVG drawn here, on the server: no chart library, nothing to
// run in the browser, and the page reads the same without JavaScript.
// Colours come from the stylesheet (classes), so light and dark follow.

type point struct {
	T time.Time
	V float64
}

type series struct {
	Name   string
	Points []point // in time order
}

const (
	chartW, chartH     = 720.0, 220.0
	padL, padR         = 56.0, 12.0
	padT, padB         = 12.0, 28.0
	maxSeriesPerChart  = 8
	gapBreaksLineAfter = 11 * time.Minute // two 5-minute buckets missing
)

var esc = template.HTMLEscapeString

// lineChart draws series over [from, to] with a zero-based y axis in unit.
func lineChart(title string, ss []series, unit string, from, to time.Time) template.HTML {
	top := 0.0
	for _, s := range ss {
		for _, p := range s.Points {
			top = math.Max(top, p.V)
		}
	}
	top = niceCeil(top * 1.1)
	x := func(t time.Time) float64 {
		return padL + (chartW-padL-padR)*float64(t.Sub(from))/float64(max(to.Sub(from), time.Second))
	}
	y := func(v float64) float64 { return padT + (chartH-padT-padB)*(1-v/top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s"><title>%s</title>`, chartW, chartH, esc(title), esc(title))
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f"/><text class="axis" x="%.0f" y="%.1f" text-anchor="end">%s %s</text>`,
			padL, chartW-padR, y(v), y(v), padL-6, y(v)+4, formatNumber(v), esc(unit))
	}
	step := tickStep(to.Sub(from))
	for t := from.Truncate(step).Add(step); t.Before(to); t = t.Add(step) {
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%.0f" text-anchor="middle">%s</text>`, x(t), chartH-8, t.UTC().Format(tickFormat(step)))
	}
	for i, s := range ss[:min(len(ss), maxSeriesPerChart)] {
		fmt.Fprintf(&b, `<g class="s%d"><title>%s</title>`, i, esc(s.Name))
		for _, run := range splitAtGaps(s.Points) {
			var pts []string
			for _, p := range run {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T), y(p.V)))
			}
			if len(pts) == 1 {
				fmt.Fprintf(&b, `<circle r="2.5" cx="%.1f" cy="%.1f"/>`, x(run[0].T), y(run[0].V))
				continue
			}
			fmt.Fprintf(&b, `<polyline points="%s"/>`, strings.Join(pts, " "))
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// splitAtGaps breaks a series where readings are missing, so a line never
// bridges an outage.
func splitAtGaps(ps []point) [][]point {
	var out [][]point
	start := 0
	for i := 1; i <= len(ps); i++ {
		if i == len(ps) || ps[i].T.Sub(ps[i-1].T) > gapBreaksLineAfter {
			out = append(out, ps[start:i])
			start = i
		}
	}
	return out
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func tickStep(span time.Duration) time.Duration {
	switch {
	case span <= 2*time.Hour:
		return 15 * time.Minute
	case span <= 12*time.Hour:
		return 2 * time.Hour
	case span <= 48*time.Hour:
		return 4 * time.Hour
	}
	return 24 * time.Hour
}

func tickFormat(step time.Duration) string {
	if step >= 24*time.Hour {
		return "Jan 2"
	}
	return "15:04"
}

// phaseBar draws a reimage's phases as one bar, each phase's length to
// scale; the running one reaches now. Each part names itself on hover.
func phaseBar(phases []wire.Phase, now time.Time) template.HTML {
	if len(phases) == 0 {
		return ""
	}
	start, end := phases[0].Start, phases[0].Start
	for _, p := range phases {
		e := p.End
		if e.IsZero() {
			e = now
		}
		if e.After(end) {
			end = e
		}
	}
	total := max(end.Sub(start), time.Millisecond)
	var b strings.Builder
	var label []string
	for _, p := range phases {
		e := p.End
		if e.IsZero() {
			e = now
		}
		label = append(label, fmt.Sprintf("%s %s", p.Name, formatDuration(e.Sub(p.Start))))
	}
	fmt.Fprintf(&b, `<svg class="phases" viewBox="0 0 1000 16" preserveAspectRatio="none" role="img" aria-label="%s">`, esc(strings.Join(label, ", ")))
	for i, p := range phases {
		e := p.End
		running := e.IsZero()
		if running {
			e = now
		}
		x := 1000 * float64(p.Start.Sub(start)) / float64(total)
		w := math.Max(1000*float64(e.Sub(p.Start))/float64(total), 2)
		cls := fmt.Sprintf("ph%d", i%8)
		if running {
			cls += " running"
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="0" width="%.1f" height="16"><title>%s</title></rect>`, cls, x, w, esc(label[i]))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
