package recipe

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFillPins(t *testing.T) {
	zero := strings.Repeat("0", 64)
	a, b, c := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("1", 64)
	digests := map[string]string{"os.image.sha256": a, "os.agent.kernel.sha256": b, "os.agent.initrd.sha256": c}
	digest := func(f string) (string, error) { return digests[f], nil }
	for name, tc := range map[string]struct {
		in, want string
		changes  []PinChange
	}{
		"placeholders keep quotes and comments": {
			in: "# head\nname: x\nos:\n  image:\n    name: lab   # the image\n    sha256: \"" + zero + "\"  # placeholder\n" +
				"  agent:\n    kernel:\n      sha256: '" + zero + "'\n    initrd:\n      sha256: " + zero + " # plain\n",
			want: "# head\nname: x\nos:\n  image:\n    name: lab   # the image\n    sha256: \"" + a + "\"  # placeholder\n" +
				"  agent:\n    kernel:\n      sha256: '" + b + "'\n    initrd:\n      sha256: \"" + c + "\" # plain\n",
			changes: []PinChange{{"os.image.sha256", 6, zero, a}, {"os.agent.kernel.sha256", 9, zero, b}, {"os.agent.initrd.sha256", 11, zero, c}},
		},
		"absent pins are added under the first key": {
			in: "name: x\nos:\n  image:\n    name: lab\n    format: raw.zst\n  agent:\n    kernel:\n      path: agent-vmlinuz  # store name\n" +
				"    initrd:\n      path: agent-initrd\n      sha256: \"" + strings.Repeat("e", 64) + "\"\n",
			want: "name: x\nos:\n  image:\n    name: lab\n    sha256: \"" + a + "\"\n    format: raw.zst\n  agent:\n    kernel:\n      path: agent-vmlinuz  # store name\n" +
				"      sha256: \"" + b + "\"\n    initrd:\n      path: agent-initrd\n      sha256: \"" + strings.Repeat("e", 64) + "\"\n",
			changes: []PinChange{{"os.image.sha256", 5, "", a}, {"os.agent.kernel.sha256", 10, "", b}},
		},
		"CRLF and no final newline": {
			in:      "name: x\r\nos:\r\n  image:\r\n    name: lab",
			want:    "name: x\r\nos:\r\n  image:\r\n    name: lab\r\n    sha256: \"" + a + "\"",
			changes: []PinChange{{"os.image.sha256", 5, "", a}},
		},
		"nothing to pin": {in: "name: x\nos:\n  handoff: kexec\n", want: "name: x\nos:\n  handoff: kexec\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, changes, err := FillPins("x.yaml", []byte(tc.in), digest)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.changes, changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFillPinsErrors(t *testing.T) {
	zero := strings.Repeat("0", 64)
	for name, tc := range map[string]struct {
		in     string
		digest func(string) (string, error)
		want   string
	}{
		"not in the store": {"name: x\nos:\n  image: {name: lab, sha256: '" + zero + "'}\n  agent:\n    kernel:\n      path: k\n      sha256: '" + zero + "'\n",
			func(f string) (string, error) { return "", errors.New("artifact lab.raw.zst: not found") },
			"x.yaml:3: os.image.sha256: artifact lab.raw.zst: not found\nx.yaml:7: os.agent.kernel.sha256: artifact lab.raw.zst: not found"},
		"flow mapping without sha256": {"name: x\nos:\n  image: {name: lab}\n", nil,
			"x.yaml:3: os.image.sha256: a flow mapping ({...}) without sha256: add it by hand"},
		"bad digest": {"name: x\nos:\n  image:\n    name: lab\n", func(string) (string, error) { return "ABC", nil },
			`the content store gave "ABC", expected 64 lowercase hex digits`},
		"not YAML": {"name: [x\n", nil, "cannot pin a file that does not parse"},
	} {
		t.Run(name, func(t *testing.T) {
			d := tc.digest
			if d == nil {
				d = func(string) (string, error) { return strings.Repeat("a", 64), nil }
			}
			out, _, err := FillPins("x.yaml", []byte(tc.in), d)
			if err == nil || !strings.Contains(err.Error(), tc.want) || out != nil {
				t.Errorf("got %q, %v; want an error containing %q and no output", out, err, tc.want)
			}
		})
	}
}
