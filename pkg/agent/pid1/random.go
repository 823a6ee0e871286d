package pid1

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rndAddEntropy is RNDADDENTROPY, _IOW('R', 0x03, int[2]).
const rndAddEntropy = 0x40085203

// RandomReady reports whether the kernel's CRNG is initialized, i.e.
// getrandom(2) (and so Go's crypto/rand) will not block.
func RandomReady() bool {
	var b [1]byte
	_, err := unix.Getrandom(b[:], unix.GRND_NONBLOCK)
	return err == nil
}

// EnsureRandom waits up to wait for the kernel's CRNG; if it is still not
// initialized, it credits 256 bits gathered from CPU timing jitter with
// RNDADDENTROPY, and reports true.
//
// Why: the DHCP client draws its transaction ID from crypto/rand, which
// blocks until the CRNG is seeded. Real servers seed it at once (RDRAND,
// TPM); a QEMU VM under TCG without virtio-rng was measured still blocked
// two minutes after boot. The agent generates no long-lived secrets (its
// token comes from the server), so a jitter seed is an acceptable last
// resort; give VMs `-device virtio-rng-pci` (and the virtio_rng module) to
// avoid it.
func EnsureRandom(wait time.Duration) (bool, error) {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if RandomReady() {
			return false, nil
		}
	}
	if RandomReady() {
		return false, nil
	}
	seed := jitter()
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return false, fmt.Errorf("opening /dev/urandom: %w", err)
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(8*len(seed)))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndAddEntropy, uintptr(unsafe.Pointer(&info[0]))); errno != 0 {
		return false, fmt.Errorf("RNDADDENTROPY: %w", errno)
	}
	if !RandomReady() {
		return true, errors.New("the kernel's random pool is still not initialized after crediting entropy")
	}
	return true, nil
}

// jitter hashes the timing of many short busy loops (the idea of
// jitterentropy: execution time varies with caches, interrupts and, under
// emulation, the host).
func jitter() []byte {
	h := sha256.New()
	var b [8]byte
	x := uint64(0)
	for i := 0; i < 1<<14; i++ {
		t0 := time.Now()
		for j := 0; j < 64+i%61; j++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		binary.NativeEndian.PutUint64(b[:], uint64(time.Since(t0).Nanoseconds())^x)
		h.Write(b[:])
	}
	return h.Sum(nil)
}
