package scaleout

import (
	"strings"
	"testing"
)

func TestRecipeDifferences(t *testing.T) {
	d1, d2, d3 := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)
	tests := map[string]struct {
		by   map[string]map[string]string
		want string
	}{
		"one instance": {map[string]map[string]string{"a": {"gpu": d1}}, ""},
		"none":         {nil, ""},
		"all the same": {map[string]map[string]string{"a": {"gpu": d1, "lab": d2}, "b": {"gpu": d1, "lab": d2}}, ""},
		"both empty":   {map[string]map[string]string{"a": {}, "b": {}}, ""},
		"one digest differs": {map[string]map[string]string{"a": {"gpu": d1, "lab": d2}, "b": {"gpu": d3, "lab": d2}},
			"the instances' recipe folders differ in 1 recipe(s): gpu (111111111111 on a; 333333333333 on b)"},
		"absent on one, named last": {map[string]map[string]string{"a": {"gpu": d1}, "b": {"gpu": d1, "new": d2}, "c": {"gpu": d1}},
			"the instances' recipe folders differ in 1 recipe(s): new (222222222222 on b; absent on a, c)"},
		"three ways": {map[string]map[string]string{"a": {"gpu": d1}, "b": {"gpu": d2}, "c": {"gpu": d2}, "d": {}},
			"the instances' recipe folders differ in 1 recipe(s): gpu (111111111111 on a; 222222222222 on b, c; absent on d)"},
		"many, the first five named": {map[string]map[string]string{
			"a": {"r1": d1, "r2": d1, "r3": d1, "r4": d1, "r5": d1, "r6": d1, "r7": d1}, "b": {}},
			"the instances' recipe folders differ in 7 recipe(s): r1 (111111111111 on a; absent on b), r2 (111111111111 on a; absent on b), " +
				"r3 (111111111111 on a; absent on b), r4 (111111111111 on a; absent on b), r5 (111111111111 on a; absent on b), and 2 more"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := recipeDifferences(tc.by); got != tc.want {
				t.Errorf("recipeDifferences:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
