package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// apiFlags are the flags of commands that talk to a running ingot server,
// so operators can run the CLI from their laptop.
type apiFlags struct {
	server    string
	token     string
	tokenFile string
}

func addAPIFlags(fs *flag.FlagSet) *apiFlags {
	f := &apiFlags{}
	fs.StringVar(&f.server, "server", "http://127.0.0.1:8080", "ingot server URL")
	fs.StringVar(&f.token, "token", "", "operator API token (prefer INGOT_TOKEN or --token-file)")
	home, _ := os.UserHomeDir()
	fs.StringVar(&f.tokenFile, "token-file", filepath.Join(home, ".config", "ingot", "token"), "file holding the operator API token")
	return f
}

type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func (f *apiFlags) client() (*apiClient, error) {
	tok := strings.TrimSpace(f.token)
	if tok == "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("no API token: set INGOT_TOKEN, --token or --token-file (create one with 'ingot token create NAME'): %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	return &apiClient{base: strings.TrimRight(f.server, "/"), token: tok, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// do sends a JSON request and decodes a JSON answer into out. Any status
// not in ok is an error carrying the server's message.
func (c *apiClient) do(ctx context.Context, method, path string, in, out any, ok ...int) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	good := len(ok) == 0 && resp.StatusCode < 300
	for _, k := range ok {
		good = good || resp.StatusCode == k
	}
	if !good {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return resp.StatusCode, fmt.Errorf("%s %s: %s (HTTP %d)", method, path, e.Error, resp.StatusCode)
		}
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decoding answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}
