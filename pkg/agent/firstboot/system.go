package firstboot

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cloudInitWait bounds the wait for cloud-init's final stage.
const cloudInitWait = 30 * time.Minute

// hostname is the running system's host name.
func (c Collector) hostname() string {
	b, err := os.ReadFile(filepath.Join(c.Root, "proc/sys/kernel/hostname"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// cloudInit is cloud-init's outcome: on the running system it first waits
// for cloud-init to finish (`cloud-init status --wait`), then reads
// run/cloud-init/result.json, which cloud-init writes when its final stage
// ends. "" when cloud-init did not run (not installed).
func (c Collector) cloudInit(ctx context.Context) string {
	if c.Run != nil {
		if _, err := os.Stat(filepath.Join(c.Root, "usr/bin/cloud-init")); err == nil {
			wctx, cancel := context.WithTimeout(ctx, cloudInitWait)
			_, _ = c.Run(wctx, "cloud-init", "status", "--wait")
			cancel()
		}
	}
	b, err := os.ReadFile(filepath.Join(c.Root, "run/cloud-init/result.json"))
	if err != nil {
		return ""
	}
	return CloudInitResult(b)
}

// CloudInitResult reads cloud-init's result.json ({"v1": {"datasource":
// ..., "errors": [...]}}): "done" without errors, else "error: " and them.
func CloudInitResult(b []byte) string {
	var doc struct {
		V1 struct {
			Errors []string `json:"errors"`
		} `json:"v1"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "error: run/cloud-init/result.json: " + err.Error()
	}
	if len(doc.V1.Errors) > 0 {
		return "error: " + strings.Join(doc.V1.Errors, "; ")
	}
	return "done"
}
