package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Body size limits for what an agent posts; the server should read bodies
// through these decoders, which enforce them.
const (
	MaxInventoryBytes = 4 << 20
	MaxSmallBytes     = 256 << 10 // progress, checks, done, firstboot
	MaxLogBytes       = 4 << 20
	MaxLogLines       = 10000
)

// decode reads exactly one JSON value of at most limit bytes.
func decode(r io.Reader, limit int64, what string, v any) error {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(v); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("decoding %s: body over %d bytes", what, limit)
		}
		return fmt.Errorf("decoding %s: %w", what, err)
	}
	if lr.N <= 0 {
		return fmt.Errorf("decoding %s: body over %d bytes", what, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decoding %s: expected one JSON value, found more", what)
	}
	return nil
}

// DecodeInventory reads a posted inventory (server side).
func DecodeInventory(r io.Reader) (machine.Inventory, error) {
	var inv machine.Inventory
	if err := decode(r, MaxInventoryBytes, "inventory", &inv); err != nil {
		return machine.Inventory{}, err
	}
	return inv, nil
}

// DecodeProgress reads a posted progress report (server side).
func DecodeProgress(r io.Reader) (Progress, error) {
	var p Progress
	if err := decode(r, MaxSmallBytes, "progress", &p); err != nil {
		return Progress{}, err
	}
	if p.Bytes < 0 || p.Total < 0 || p.Written < 0 || p.RateBps < 0 {
		return Progress{}, fmt.Errorf("progress: negative bytes, total, written or rate_bps")
	}
	if p.Step == "" {
		return Progress{}, fmt.Errorf("progress: step is empty")
	}
	return p, nil
}

// DecodeChecks reads posted check results (server side).
func DecodeChecks(r io.Reader) ([]CheckResult, error) {
	var rs []CheckResult
	if err := decode(r, MaxSmallBytes, "checks", &rs); err != nil {
		return nil, err
	}
	for i, c := range rs {
		if strings.TrimSpace(c.Name) == "" {
			return nil, fmt.Errorf("checks[%d]: name is empty", i)
		}
		if c.OK && c.Skipped {
			return nil, fmt.Errorf("checks[%d] %s: both ok and skipped", i, c.Name)
		}
	}
	return rs, nil
}

// DecodeLog reads posted log lines (server side).
func DecodeLog(r io.Reader) (Log, error) {
	var l Log
	if err := decode(r, MaxLogBytes, "log", &l); err != nil {
		return Log{}, err
	}
	if len(l.Lines) > MaxLogLines {
		return Log{}, fmt.Errorf("log: %d lines, at most %d per post", len(l.Lines), MaxLogLines)
	}
	return l, nil
}

// DecodeDone reads a posted done report (server side). OK without a step,
// or a failure without a reason, is refused: the engine must always be able
// to say why a node failed.
func DecodeDone(r io.Reader) (Done, error) {
	var d Done
	if err := decode(r, MaxSmallBytes, "done", &d); err != nil {
		return Done{}, err
	}
	if d.Step == "" {
		return Done{}, fmt.Errorf("done: step is empty")
	}
	if !d.OK && strings.TrimSpace(d.Reason) == "" {
		return Done{}, fmt.Errorf("done: ok is false and reason is empty")
	}
	if d.ImageSHA256 != "" && !hex64.MatchString(d.ImageSHA256) {
		return Done{}, fmt.Errorf("done: image_sha256 %q: expected 64 lowercase hex digits", d.ImageSHA256)
	}
	return d, nil
}

// DecodeFirstBoot reads a posted first-boot report (server side).
func DecodeFirstBoot(r io.Reader) (FirstBoot, error) {
	var s FirstBoot
	if err := decode(r, MaxSmallBytes, "firstboot", &s); err != nil {
		return FirstBoot{}, err
	}
	if s.Kernel == "" {
		return FirstBoot{}, fmt.Errorf("firstboot: kernel is empty")
	}
	for i, c := range s.BurnIn {
		if c.Name == "" {
			return FirstBoot{}, fmt.Errorf("firstboot: burn_in[%d]: name is empty", i)
		}
		if c.OK && c.Skipped {
			return FirstBoot{}, fmt.Errorf("firstboot: burn_in[%d] %s: both ok and skipped", i, c.Name)
		}
	}
	return s, nil
}
