package imagewrite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ZeroMode says how a target gets the image's zero runs.
type ZeroMode int

// The zero modes.
const (
	// ZeroWrite writes zero runs like any data: the only safe choice when
	// nothing is known about what the target reads back.
	ZeroWrite ZeroMode = iota
	// ZeroSkip leaves zero runs out: the target is a regular file this
	// package created or truncated, which reads back zeros (holes).
	ZeroSkip
	// ZeroOut issues BLKZEROOUT for each zero run: a block device whose
	// queue advertises write-zeroes (write_zeroes_max_bytes > 0), so the
	// kernel zeroes the range without the data crossing the bus.
	ZeroOut
)

func (m ZeroMode) String() string {
	switch m {
	case ZeroSkip:
		return "skip"
	case ZeroOut:
		return "zeroout"
	}
	return "write"
}

// Target is where the image goes: a block device or a regular file.
type Target struct {
	Path  string
	File  *os.File
	Block bool     // a block device
	Size  int64    // device size; 0 for a file
	Zero  ZeroMode // how zero runs are handled

	// Direct is true while the file is open with O_DIRECT: aligned writes
	// go from the buffer to the device with no page-cache copy (and no
	// dirty-page throttling). An unaligned write (the image's tail) turns it off.
	Direct bool

	mu             sync.Mutex // Direct and the flush-behind state, for concurrent writers
	prevOff, prevN int64      // the range whose writeback was started last
	noFlush        bool       // sync_file_range refused: leave it all to the final fsync
}

// directAlign is the alignment O_DIRECT writes keep (offset, length and
// buffer address): 4096 covers 512- and 4096-byte logical blocks.
const directAlign = 4096

// tryDirect turns on O_DIRECT if the filesystem or device accepts it
// (tmpfs does not).
func (t *Target) tryDirect() {
	fl, err := unix.FcntlInt(t.File.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return
	}
	if _, err := unix.FcntlInt(t.File.Fd(), unix.F_SETFL, fl|unix.O_DIRECT); err == nil {
		t.Direct = true
	}
}

func (t *Target) noDirect() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.Direct {
		return
	}
	if fl, err := unix.FcntlInt(t.File.Fd(), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(t.File.Fd(), unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	t.Direct = false
}

// writeAt writes b at off, directly when b, off and len(b) are aligned.
func (t *Target) writeAt(b []byte, off int64) error {
	if off%directAlign != 0 || len(b)%directAlign != 0 || uintptr(unsafe.Pointer(&b[0]))%directAlign != 0 {
		t.noDirect()
	}
	_, err := t.File.WriteAt(b, off)
	if err != nil && t.isDirect() && errors.Is(err, unix.EINVAL) {
		// Some filesystems accept O_DIRECT at open and refuse the write.
		t.noDirect()
		_, err = t.File.WriteAt(b, off)
	}
	if err != nil {
		return fmt.Errorf("writing %s at %d: %w", t.Path, off, err)
	}
	return nil
}

func (t *Target) isDirect() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Direct
}

// alignedBuffer returns n bytes whose address is directAlign-aligned.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(&b[0]))%directAlign)) % directAlign
	return b[skip : skip+n : skip+n]
}

// OpenTarget opens path for writing. A regular file (existing or not) is
// created or truncated, so it reads back zeros and zero runs are skipped. A
// block device is opened as is; zero runs use BLKZEROOUT where the device
// supports write-zeroes (read from sysRoot, usually "/sys"), else are written.
func OpenTarget(path, sysRoot string) (*Target, error) {
	st, err := os.Stat(path)
	if err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
		f, err := os.OpenFile(path, os.O_WRONLY|unix.O_EXCL, 0)
		if err != nil {
			return nil, fmt.Errorf("opening block device %s: %w", path, err)
		}
		t := &Target{Path: path, File: f, Block: true, Zero: ZeroWrite}
		var size uint64
		if err := ioctlPtr(f, unix.BLKGETSIZE64, unsafe.Pointer(&size)); err != nil {
			f.Close()
			return nil, fmt.Errorf("BLKGETSIZE64 on %s: %w", path, err)
		}
		t.Size = int64(size)
		if writeZeroes(sysRoot, st) {
			t.Zero = ZeroOut
		}
		t.tryDirect()
		return t, nil
	}
	if err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("target %s is a %s: expected a block device or a regular file", path, st.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating target file %s: %w", path, err)
	}
	t := &Target{Path: path, File: f, Zero: ZeroSkip}
	t.tryDirect()
	return t, nil
}

// writeZeroes reports whether the block device st advertises write-zeroes in
// SYSROOT/dev/block/MAJ:MIN/queue/write_zeroes_max_bytes (for a partition
// the queue is its parent's).
func writeZeroes(sysRoot string, st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sysRoot == "" {
		return false
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(sysRoot, "dev/block", fmt.Sprintf("%d:%d", unix.Major(uint64(sys.Rdev)), unix.Minor(uint64(sys.Rdev)))))
	if err != nil {
		return false
	}
	for _, d := range []string{dev, filepath.Dir(dev)} {
		b, err := os.ReadFile(filepath.Join(d, "queue/write_zeroes_max_bytes"))
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return err == nil && n > 0
	}
	return false
}

// zeroRange makes [off, off+n) read back zeros according to the zero mode;
// it reports whether the range was handled (false: the caller writes zeros).
func (t *Target) zeroRange(off, n int64) (bool, error) {
	switch t.Zero {
	case ZeroSkip:
		return true, nil
	case ZeroOut:
		rng := [2]uint64{uint64(off), uint64(n)}
		if err := ioctlPtr(t.File, unix.BLKZEROOUT, unsafe.Pointer(&rng[0])); err != nil {
			return false, fmt.Errorf("BLKZEROOUT %s [%d, +%d): %w", t.Path, off, n, err)
		}
		return true, nil
	}
	return false, nil
}

// flushBehind starts writeback of [off, off+n) just written, then waits for
// the previous range's writeback and drops it from the page cache. The disk
// then works while the next buffer is decompressed, instead of everything
// waiting for one fsync at the end, and the page cache never fills with
// dirty image pages (the streaming-write pattern of sync_file_range(2)).
func (t *Target) flushBehind(off, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Direct || t.noFlush || n <= 0 {
		return
	}
	fd := int(t.File.Fd())
	if err := unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		t.noFlush = true
		return
	}
	if t.prevN > 0 {
		unix.SyncFileRange(fd, t.prevOff, t.prevN, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		unix.Fadvise(fd, t.prevOff, t.prevN, unix.FADV_DONTNEED)
	}
	t.prevOff, t.prevN = off, n
}

// finish makes the target exactly end bytes long (a file) and durable.
func (t *Target) finish(end int64) error {
	if !t.Block {
		if err := t.File.Truncate(end); err != nil {
			return fmt.Errorf("setting %s to %d bytes: %w", t.Path, end, err)
		}
	}
	if err := t.File.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", t.Path, err)
	}
	if t.Block {
		// Drop the page cache so what is read next comes from the device.
		if err := ioctlPtr(t.File, unix.BLKFLSBUF, nil); err != nil {
			return fmt.Errorf("BLKFLSBUF %s: %w", t.Path, err)
		}
	}
	return nil
}

// invalidate breaks a partly or wrongly written image so the machine cannot
// boot it: the first and last MiB of the written extent (the primary and the
// backup GPT) are overwritten with zeros.
func (t *Target) invalidate(end int64) error {
	const mib = 1 << 20
	t.noDirect()
	zero := make([]byte, mib)
	var first error
	for _, off := range []int64{0, max(0, end-mib)} {
		if _, err := t.File.WriteAt(zero[:min(mib, max(end-off, 0))], off); err != nil && first == nil {
			first = fmt.Errorf("wiping %s at %d: %w", t.Path, off, err)
		}
	}
	if err := t.File.Sync(); err != nil && first == nil {
		first = err
	}
	return first
}

// Close closes the target.
func (t *Target) Close() error { return t.File.Close() }

func ioctlPtr(f *os.File, req uint, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno unix.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

var zeroBlock = make([]byte, zeroChunk)

// zeroChunk is the granularity of zero-run detection: 64 KiB, a multiple of
// every logical block size, so BLKZEROOUT offsets stay aligned.
const zeroChunk = 64 << 10

func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), zeroChunk)
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
