package image

import "context"

// The building blocks below are the image build's own, exported for other
// boot media built the same way (pkg/iso's agent CD): no mounts, no loop
// devices, identical bytes for identical inputs.

// BuildUKI writes a unified kernel image to out (see makeUKI), its PE
// timestamp set to epoch. It writes two scratch files beside out: give each
// concurrent build a folder of its own.
func BuildUKI(ctx context.Context, u UKI, out string, epoch int64) error {
	return runner{epoch: epoch}.makeUKI(ctx, u, out)
}

// MakeFAT creates a FAT file system image of size bytes at img holding
// files (mkfs.vfat --invariant with the given 8-hex-digit serial, then
// mtools), every file's time set to epoch.
func MakeFAT(ctx context.Context, img string, size int64, serial string, files []ESPFile, epoch int64) error {
	return runner{epoch: epoch}.makeESP(ctx, img, size, serial, files, "")
}
