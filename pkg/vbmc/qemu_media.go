package vbmc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// cdrom is the QEMU backend's virtual CD drive: the image the BMC put in
// it, and the local copy QEMU reads (a real BMC streams the image from its
// URL while the host reads it; QEMU needs a file).
type cdrom struct {
	image string // URL inserted; "" empty
	file  string // local copy of from
	from  string // URL the copy was fetched from
}

// maxMedia bounds a fetched image (a DVD's worth).
const maxMedia = 8 << 30

// InsertMedia puts the image at the URL (http or https) into the CD drive
// from the next power-on, which fetches it.
func (q *QEMU) InsertMedia(_ context.Context, image string) error {
	u, err := url.Parse(image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("image %q: expected an http:// or https:// URL", image)
	}
	q.mu.Lock()
	q.media.image = image
	q.mu.Unlock()
	q.logger().Info("virtual media inserted", "image", image)
	return nil
}

// EjectMedia empties the CD drive from the next power-on (a running QEMU
// keeps reading what it has: real BMCs differ on this too) and deletes
// the local copy.
func (q *QEMU) EjectMedia(context.Context) error {
	q.mu.Lock()
	file := q.media.file
	q.media = cdrom{}
	q.mu.Unlock()
	if file != "" {
		_ = os.Remove(file)
	}
	q.logger().Info("virtual media ejected")
	return nil
}

// Media returns the URL of the image in the CD drive ("" empty).
func (q *QEMU) Media() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.media.image
}

// fetchMedia returns the local copy of the inserted image and its URL,
// fetching it unless the copy is of the same URL ("", "" when the drive is
// empty).
func (q *QEMU) fetchMedia(ctx context.Context) (file, image string, err error) {
	q.mu.Lock()
	cd := q.media
	q.mu.Unlock()
	if cd.image == "" {
		return "", "", nil
	}
	if cd.from == cd.image && cd.file != "" {
		if _, err := os.Stat(cd.file); err == nil {
			return cd.file, cd.image, nil
		}
	}
	start := time.Now()
	file, n, err := q.download(ctx, cd.image)
	if err != nil {
		return "", "", fmt.Errorf("fetching virtual media %s: %w", cd.image, err)
	}
	q.mu.Lock()
	old := q.media.file
	if q.media.image != cd.image { // ejected or replaced meanwhile
		q.mu.Unlock()
		os.Remove(file)
		return q.fetchMedia(ctx)
	}
	q.media.file, q.media.from = file, cd.image
	q.mu.Unlock()
	if old != "" && old != file {
		_ = os.Remove(old)
	}
	q.logger().Info("virtual media fetched", "image", cd.image, "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	return file, cd.image, nil
}

func (q *QEMU) download(ctx context.Context, image string) (string, int64, error) {
	hc := q.MediaClient
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("HTTP %s", resp.Status)
	}
	f, err := os.CreateTemp(q.MediaDir, "ingot-vbmc-cd-*.iso")
	if err != nil {
		return "", 0, err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, maxMedia+1))
	if err == nil && n > maxMedia {
		err = fmt.Errorf("larger than %d bytes", int64(maxMedia))
	}
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", n, resp.ContentLength)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), n, nil
}

// cdArgs attach file as an IDE CD drive (on the pc machine's PIIX and
// q35's AHCI alike), the first boot device when boot is set: bootindex=0,
// before the 1 and up the machine's own devices carry. None when file is "".
func cdArgs(file string, boot bool) []string {
	if file == "" {
		return nil
	}
	dev := "ide-cd,drive=vcd0"
	if boot {
		dev += ",bootindex=0"
	}
	// QEMU's option syntax doubles a comma inside a value.
	return []string{"-drive", "if=none,id=vcd0,media=cdrom,readonly=on,format=raw,file=" + strings.ReplaceAll(file, ",", ",,"),
		"-device", dev}
}

var _ MediaBackend = (*QEMU)(nil)
