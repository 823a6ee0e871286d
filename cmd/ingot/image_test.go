package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/initramfs"
)

// imageCLI runs ingot in-process with an empty environment.
func imageCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestImageImportAndLs(t *testing.T) {
	srv := startServe(t, recipesDir(t, nil))
	data := filepath.Join(srv.data, "artifacts") // the running server's content store
	img := filepath.Join(t.TempDir(), "lab.raw.zst")
	os.WriteFile(img, []byte("not really zstd, but bytes to store"), 0o644)
	out, errs, err := imageCLI(t, "image", "import", img, "--data", data)
	if err != nil {
		t.Fatalf("image import: %v: %s", err, errs)
	}
	fields := strings.Fields(out)
	if len(fields) != 2 || len(fields[0]) != 64 || fields[1] != "lab.raw.zst" {
		t.Fatalf("image import printed %q, want SHA256 and name", out)
	}
	if _, err := os.Stat(filepath.Join(data, "sha256", fields[0])); err != nil {
		t.Errorf("imported image not in the content store: %v", err)
	}
	out, _, err = imageCLI(t, "image", "ls") // asks the server
	if err != nil || !strings.Contains(out, "lab.raw.zst") || !strings.Contains(out, fields[0]) || !strings.Contains(out, " 35\n") {
		t.Errorf("image ls = %q, %v", out, err)
	}
	if _, errs, err := imageCLI(t, "image", "import", "--data", data, filepath.Join(t.TempDir(), "missing.raw")); err == nil {
		t.Errorf("import of a missing file succeeded: %s", errs)
	}
	other := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(other, []byte("x"), 0o644)
	if _, _, err := imageCLI(t, "image", "import", "--data", data, other); err == nil || !strings.Contains(err.Error(), ".raw") {
		t.Errorf("import of notes.txt = %v, want an error asking for .raw or .raw.zst", err)
	}
}

func TestImagePlanCLI(t *testing.T) {
	out, errs, err := imageCLI(t, "image", "build", "--plan", "../../images/lab")
	if err != nil {
		t.Fatalf("image build --plan: %v: %s", err, errs)
	}
	for _, want := range []string{"# image lab version 1", "mkfs.vfat --invariant -i", "mkfs.ext4"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := imageCLI(t, "image", "build", "../../images/nosuch"); err == nil || !strings.Contains(err.Error(), "image.yaml") {
		t.Errorf("build of a missing folder = %v, want an error naming image.yaml", err)
	}
}

func TestInitramfsLs(t *testing.T) {
	var a initramfs.Archive
	a.AddFile("init", 0o755, []byte("#!/bin/sh\n"))
	var raw, gz bytes.Buffer
	a.WriteTo(&raw, 0)
	initramfs.Compress(&gz, raw.Bytes(), initramfs.Gzip)
	p := filepath.Join(t.TempDir(), "initrd.img")
	os.WriteFile(p, gz.Bytes(), 0o644)
	out, _, err := imageCLI(t, "initramfs", "ls", p)
	if err != nil || out != "-rwxr-xr-x        10 init\n" {
		t.Errorf("initramfs ls = %q, %v", out, err)
	}
}

func TestFlagsFirst(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("out", "", "")
	fs.Bool("plan", false, "")
	for _, tc := range []struct{ in, want []string }{
		{[]string{"images/lab", "--out", "D"}, []string{"--out", "D", "images/lab"}},
		{[]string{"--plan", "images/lab", "--out=D"}, []string{"--plan", "--out=D", "images/lab"}},
		{[]string{"a", "--", "--b"}, []string{"a", "--b"}},
		{[]string{"--plan", "x"}, []string{"--plan", "x"}},
	} {
		if d := cmp.Diff(tc.want, flagsFirst(fs, tc.in)); d != "" {
			t.Errorf("flagsFirst(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestImageLockUsage(t *testing.T) {
	if _, _, err := imageCLI(t, "image", "lock"); err != errUsage {
		t.Errorf("image lock without a folder = %v, want the usage", err)
	}
	if _, _, err := imageCLI(t, "image", "lock", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "reading image definition") {
		t.Errorf("image lock of a missing folder = %v", err)
	}
}
