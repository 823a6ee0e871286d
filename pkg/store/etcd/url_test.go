package etcd

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	tests := map[string]struct {
		url  string
		want Config
	}{
		"one host, default port": {"etcd://etcd-1/ingot",
			Config{Endpoints: []string{"etcd-1:2379"}, Prefix: "/ingot/"}},
		"three hosts": {"etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:22379/ingot/site-a",
			Config{Endpoints: []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:22379"}, Prefix: "/ingot/site-a/"}},
		"IPv6 with and without port": {"etcd://[fd00::1]:2379,[fd00::2]/p",
			Config{Endpoints: []string{"[fd00::1]:2379", "[fd00::2]:2379"}, Prefix: "/p/"}},
		"trailing slash": {"etcd://h/a.b_c-d/",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/a.b_c-d/"}},
		"TLS with client certificate": {"etcd://h:2379/p?cacert=/etc/ca.pem&cert=/etc/c.pem&key=/etc/k.pem&server-name=etcd.example",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/p/", TLS: true, CACert: "/etc/ca.pem", Cert: "/etc/c.pem",
				Key: "/etc/k.pem", ServerName: "etcd.example"}},
		"TLS with the system's roots": {"etcd://h/p?tls=true",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/p/", TLS: true}},
		"user and password file": {"etcd://h/p?user=ingot&password-file=/etc/ingot/etcd.password",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/p/", Username: "ingot", PasswordFile: "/etc/ingot/etcd.password"}},
		"user and password": {"etcd://h/p?user=ingot&password=s3cret",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/p/", Username: "ingot", Password: "s3cret"}},
		"timeouts": {"etcd://h/p?dial-timeout=2s&timeout=1m",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/p/", DialTimeout: 2 * time.Second, RequestTimeout: time.Minute}},
		"quota with a unit": {"etcd://h/p?quota=8GiB",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/p/", QuotaBytes: 8 << 30}},
		"quota in bytes": {"etcd://h/p?quota=67108864",
			Config{Endpoints: []string{"h:2379"}, Prefix: "/p/", QuotaBytes: 64 << 20}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseURL(tc.url)
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tc.url, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseURL(%q) (-want +got):\n%s", tc.url, diff)
			}
			again, err := ParseURL(got.String())
			if got.Password == "" && (err != nil || !cmp.Equal(got, again)) {
				t.Errorf("String() = %q reads back as %+v, %v; want the same config", got.String(), again, err)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	tests := map[string]struct {
		url   string
		parts []string // each must be in the error
	}{
		"other scheme":            {"bolt:///var/lib/ingot.db", []string{"etcd://"}},
		"no endpoint":             {"etcd:///p", []string{"no endpoint"}},
		"no prefix":               {"etcd://h:2379", []string{"no key prefix"}},
		"root prefix":             {"etcd://h:2379/", []string{"no key prefix"}},
		"query without prefix":    {"etcd://h:2379?tls=true", []string{"no key prefix"}},
		"empty endpoint":          {"etcd://a,,b/p", []string{"endpoint 2", "empty"}},
		"bad port":                {"etcd://a:99999/p", []string{"endpoint 1", "port \"99999\""}},
		"port not a number":       {"etcd://a:x/p", []string{"port \"x\""}},
		"IPv6 without brackets":   {"etcd://fd00::1/p", []string{"in brackets"}},
		"unclosed bracket":        {"etcd://[fd00::1/p", []string{"[IPv6]"}},
		"duplicate endpoint":      {"etcd://a,a:2379/p", []string{"endpoint 2", "twice"}},
		"user info":               {"etcd://u:pw@h/p", []string{"user=", "password-file"}},
		"bad prefix segment":      {"etcd://h/ingot/../x", []string{"segment \"..\""}},
		"empty prefix segment":    {"etcd://h/a//b", []string{"segment \"\""}},
		"space in prefix":         {"etcd://h/a b", []string{"segment \"a b\""}},
		"unknown parameter":       {"etcd://h/p?cafile=/x", []string{"\"cafile\"", "cacert"}},
		"parameter twice":         {"etcd://h/p?user=a&user=b&password=x", []string{"user", "2 times"}},
		"empty value":             {"etcd://h/p?cacert=", []string{"cacert", "empty"}},
		"cert without key":        {"etcd://h/p?cert=/c.pem", []string{"cert and key"}},
		"tls=false with a CA":     {"etcd://h/p?tls=false&cacert=/ca.pem", []string{"tls=false"}},
		"tls not a bool":          {"etcd://h/p?tls=yes please", []string{"tls", "true or false"}},
		"password without user":   {"etcd://h/p?password-file=/pw", []string{"without user"}},
		"user without password":   {"etcd://h/p?user=ingot", []string{"without a password"}},
		"quota past etcd's 8 GiB": {"etcd://h/p?quota=9GiB", []string{"quota", "at most 8GiB"}},
		"quota not a size":        {"etcd://h/p?quota=lots", []string{"quota", "such as 2GiB"}},
		"both passwords":          {"etcd://h/p?user=u&password=a&password-file=/pw", []string{"give one"}},
		"bad duration":            {"etcd://h/p?timeout=soon", []string{"timeout", "duration"}},
		"zero duration":           {"etcd://h/p?dial-timeout=0s", []string{"dial-timeout", "positive"}},
		"fragment":                {"etcd://h/p#x", []string{"fragment"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseURL(tc.url)
			if err == nil {
				t.Fatalf("ParseURL(%q) succeeded; want an error", tc.url)
			}
			for _, p := range tc.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("ParseURL(%q) = %q; want it to mention %q", tc.url, err, p)
				}
			}
		})
	}
}

// A password given in the URL never shows in an error or in String.
func TestParseURLHidesPassword(t *testing.T) {
	for _, u := range []string{"etcd://h/p?user=u&password=hunter2&cafile=x", "etcd://h/p?password=hunter2&user=u&timeout=x"} {
		_, err := ParseURL(u)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q) = %v; want an error without the password", u, err)
		}
	}
	c, err := ParseURL("etcd://h/p?user=u&password=hunter2")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.String(), "hunter2") {
		t.Errorf("String() = %q shows the password", c.String())
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"etcd://h/p", "etcd://a:1,[::1]:2/x/y?user=u&password-file=/f&tls=true",
		"etcd://[fd00::1/p", "etcd://h/p?cert=a&key=b&timeout=3s", "etcd://,/", "etcd://h/p?password=x&x=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := ParseURL(raw)
		if err != nil {
			return
		}
		if len(c.Endpoints) == 0 || !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") || len(c.Prefix) < 3 {
			t.Fatalf("ParseURL(%q) = %+v: accepted without endpoints or a prefix", raw, c)
		}
		again, err := ParseURL(c.String())
		if err != nil {
			t.Fatalf("String() of %q = %q does not parse: %v", raw, c.String(), err)
		}
		// The password may only come back as its placeholder. (Looking for
		// the password's text in String() fails on a password such as "0"
		// that any host or prefix may hold: the fuzzer found one.)
		if c.Password != "" && again.Password != "xxxxx" {
			t.Fatalf("String() of %q = %q carries the password, not its placeholder", raw, c.String())
		}
		again.Password = c.Password
		if !cmp.Equal(c, again) {
			t.Fatalf("%q -> %+v -> %q -> %+v", raw, c, c.String(), again)
		}
	})
}
