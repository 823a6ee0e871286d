package web

import (
	"io/fs"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The stylesheet's text colours keep WCAG 2's 4.5:1 contrast against the
// page and the cards they sit on, in the light scheme and the dark one.
func TestContrast(t *testing.T) {
	css, err := fs.ReadFile(assetFS, "assets/style.css")
	if err != nil {
		t.Fatal(err)
	}
	light := cssVars(t, string(css), ":root {")
	dark := cssVars(t, string(css), "@media (prefers-color-scheme: dark) {\n  :root {")
	for k, v := range light {
		if _, ok := dark[k]; !ok {
			dark[k] = v
		}
	}
	text := []string{"fg", "muted", "link", "ok", "busy", "warn", "bad"}
	for scheme, vars := range map[string]map[string]string{"light": light, "dark": dark} {
		for _, fg := range text {
			for _, bg := range []string{"bg", "card"} {
				if c := contrast(t, vars[fg], vars[bg]); c < 4.5 {
					t.Errorf("%s: --%s %s on --%s %s: contrast %.2f, want 4.5 or more", scheme, fg, vars[fg], bg, vars[bg], c)
				}
			}
		}
	}
}

var cssVar = regexp.MustCompile(`--([a-z0-9]+):\s*(#[0-9a-f]{6})`)

// cssVars reads the custom properties of the block that starts at head.
func cssVars(t *testing.T, css, head string) map[string]string {
	i := strings.Index(css, head)
	if i < 0 {
		t.Fatalf("style.css has no %q block", head)
	}
	block, _, _ := strings.Cut(css[i+len(head):], "}")
	out := map[string]string{}
	for _, m := range cssVar.FindAllStringSubmatch(block, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

// luminance is WCAG 2's relative luminance of #rrggbb.
func luminance(t *testing.T, hex string) float64 {
	if len(hex) != 7 {
		t.Fatalf("colour %q: want #rrggbb", hex)
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		c := float64(v) / 255
		if c <= 0.03928 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}
