package store

import (
	"context"
	"fmt"
)

// ErrFenced: a write carried a fence (WithFence) that no longer holds its
// value: the job it was made for belongs to someone else now. Nothing was
// written. errors.Is(err, ErrStale) also holds.
var ErrFenced = fmt.Errorf("fenced out: %w", ErrStale)

// Fence is a condition of a write: the fence Key must hold Value.
type Fence struct {
	Key   string
	Value string
}

type fenceKey struct{}

// WithFence returns a context whose writes (FenceStore) are made only
// while the fence key holds value; fences already in ctx still apply.
func WithFence(ctx context.Context, key, value string) context.Context {
	old := Fences(ctx)
	fs := make([]Fence, 0, len(old)+1)
	fs = append(append(fs, old...), Fence{Key: key, Value: value})
	return context.WithValue(ctx, fenceKey{}, fs)
}

// Fences lists the fences the writes made under ctx must check.
func Fences(ctx context.Context) []Fence {
	fs, _ := ctx.Value(fenceKey{}).([]Fence)
	return fs
}

// CheckFence is the rule every backend applies inside a write: have is
// what the fence holds now ("" when it has none).
func CheckFence(f Fence, have string) error {
	if have == f.Value {
		return nil
	}
	if have == "" {
		return fmt.Errorf("fence %s is gone (wanted %q): %w", f.Key, f.Value, ErrFenced)
	}
	return fmt.Errorf("fence %s holds %q, not %q: %w", f.Key, have, f.Value, ErrFenced)
}

// CheckFenceSwap is the rule of SwapFence: the fence holds have; old is
// what the caller expects.
func CheckFenceSwap(key, have, old string) error {
	if have == old {
		return nil
	}
	if have == "" {
		return fmt.Errorf("fence %s is not set (expected %q): %w", key, old, ErrStale)
	}
	return fmt.Errorf("fence %s holds %q (expected %q): %w", key, have, orAbsent(old), ErrStale)
}

func orAbsent(v string) string {
	if v == "" {
		return "none"
	}
	return v
}
