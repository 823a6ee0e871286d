package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageProvides: a recipe machines are assigned to fails lint when its
// image is not locked or lacks a package or tool its drivers and burn-in
// checks need, naming each with where it comes from; a template only gets
// warnings; a locked image with everything is clean.
func TestImageProvides(t *testing.T) {
	images := t.TempDir()
	img := filepath.Join(images, "gpu")
	os.MkdirAll(img, 0o755)
	os.WriteFile(filepath.Join(img, "image.yaml"), []byte("name: gpu\nrepositories: [{name: cuda, url: \"https://cuda.invalid/\"}]\n"+
		"build_steps: [{installs: [/usr/local/bin/gpu_burn]}]\n"), 0o644)
	recipe := func(template bool) string {
		s := "name: r\nversion: '1'\nos:\n  image: {name: gpu, sha256: \"" + strings.Repeat("ab", 32) + "\", format: raw.zst}\n" +
			"drivers: {nvidia: 535.309.01, nvidia-fabricmanager: 535.309.01}\n" +
			"acceptance:\n  burn_in: {duration: 1h}\n  checks:\n    - {name: gpu-burn}\n    - {name: dcgm-diag}\n"
		if template {
			s += "template: true\n"
		}
		return s
	}
	lint := func(t *testing.T, body string) []Diagnostic {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(body), 0o644)
		_, diags := Options{ImagesDir: images}.Load(dir)
		return diags
	}
	diags := lint(t, recipe(false))
	text := diagText(diags)
	for _, want := range []string{
		"error: os.image.name: image gpu has no packages.lock, so its bytes cannot be pinned: configure and lock its repositories cuda (https://cuda.invalid/)",
		"error: os.image.name: image gpu does not install what the recipe needs: nvidia-kernel-dkms or nvidia-open-kernel-dkms or nvidia-driver or cuda-drivers (drivers.nvidia",
		"nvidia-fabricmanager (drivers.nvidia-fabricmanager, from NVIDIA's CUDA repository); datacenter-gpu-manager (check dcgm-diag, from NVIDIA's CUDA repository)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lint:\n%s\nwant %q", text, want)
		}
	}
	if strings.Contains(text, "gpu_burn") {
		t.Errorf("gpu_burn is installed by a build step, yet lint wants it:\n%s", text)
	}
	if d := lint(t, recipe(true)); HasErrors(d) || len(d) != 2 {
		t.Errorf("a template gets warnings only:\n%s", diagText(d))
	}
	os.WriteFile(filepath.Join(img, "packages.lock"), []byte("inputs sha256:x\ndeb nvidia-kernel-dkms 1 amd64 x 1 debian:bookworm p.deb\n"+
		"deb nvidia-fabricmanager-535 1 amd64 x 1 repo:cuda p.deb\ndeb datacenter-gpu-manager 1 amd64 x 1 repo:cuda p.deb\n"), 0o644)
	if d := lint(t, recipe(false)); len(d) != 0 {
		t.Errorf("a locked image with everything:\n%s", diagText(d))
	}
}
