package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

// bbolt's on-disk meta page (go.etcd.io/bbolt internal/common): a 16-byte
// page header, then magic, version, page size, flags, root bucket (root
// page, sequence), freelist page, high-water page id, txid and a FNV-64a
// checksum of everything before it. Two copies, at pages 0 and 1.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSumEnd     = 56 // bytes of the meta the checksum covers
)

type boltMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's page
	freelist uint64 // the free list's page (noFreelist: none kept)
	pgid     uint64 // pages the file holds: the high-water mark
	txid     uint64
}

// parseMeta decodes and validates one meta page.
func parseMeta(page []byte) (boltMeta, error) {
	if len(page) < pageHeaderSize+metaSumEnd+8 {
		return boltMeta{}, errors.New("too short for a meta page")
	}
	m := page[pageHeaderSize:]
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(m[:metaSumEnd])
	switch {
	case le.Uint32(m[0:]) != boltMagic:
		return boltMeta{}, errors.New("not a bbolt meta page (magic)")
	case le.Uint32(m[4:]) != boltVersion:
		return boltMeta{}, fmt.Errorf("bbolt version %d, expected %d", le.Uint32(m[4:]), boltVersion)
	case le.Uint64(m[metaSumEnd:]) != h.Sum64():
		return boltMeta{}, errors.New("checksum mismatch")
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]),
		txid: le.Uint64(m[48:])}, nil
}

// checkFile checks, before bbolt maps the file, that a valid meta page
// exists and that the file holds every page it counts: mapped, a truncated
// file faults the process (SIGBUS) on first access instead of failing.
// A missing or empty file is a new database.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	m0, err0 := parseMeta(head[:n])
	// Meta page 1 sits one page in; with page 0 unreadable, bbolt assumes
	// the OS page size, as here.
	size := int64(4096)
	if err0 == nil && m0.pageSize >= 512 && m0.pageSize <= 1<<16 {
		size = int64(m0.pageSize)
	}
	second := make([]byte, size)
	_, rerr := f.ReadAt(second, size)
	m1, err1 := parseMeta(second)
	if rerr != nil && err1 == nil {
		err1 = rerr
	}
	var best boltMeta
	switch {
	case err0 != nil && err1 != nil:
		return damaged(path, fmt.Sprintf("neither meta page is valid (page 0: %v; page 1: %v)", err0, err1))
	case err0 != nil, err1 == nil && m1.txid > m0.txid:
		best = m1
	default:
		best = m0
	}
	if need := int64(best.pgid) * int64(best.pageSize); fi.Size() < need {
		return damaged(path, fmt.Sprintf("it is %d bytes but its meta page (txid %d) counts %d pages of %d bytes (%d bytes): truncated",
			fi.Size(), best.txid, best.pgid, best.pageSize, need))
	}
	if best.pageSize < 512 || best.pageSize > 1<<16 {
		return damaged(path, fmt.Sprintf("its meta page (txid %d) says pages are %d bytes", best.txid, best.pageSize))
	}
	if err := checkPages(path, best, best.root, best.freelist); err != nil {
		return damaged(path, err.Error())
	}
	return nil
}

// checkMetaHeaders checks the page headers of the two meta pages, which
// their checksum does not cover: bbolt's own check asserts them on a
// goroutine of its own, where a bad one would crash the process.
func checkMetaHeaders(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 4096)
	if _, err := io.ReadFull(f, head); err != nil {
		return damaged(path, "it is shorter than a meta page")
	}
	size := int64(4096)
	if m, err := parseMeta(head); err == nil && m.pageSize >= 512 && m.pageSize <= 1<<16 {
		size = int64(m.pageSize)
	}
	for id := range int64(2) {
		h := make([]byte, pageHeaderSize)
		if _, err := f.ReadAt(h, id*size); err != nil {
			return damaged(path, fmt.Sprintf("meta page %d: %v", id, err))
		}
		if got, flags := binary.LittleEndian.Uint64(h), binary.LittleEndian.Uint16(h[8:]); got != uint64(id) || flags != metaPage {
			return damaged(path, fmt.Sprintf("meta page %d's header says page %d of type %#x", id, got, flags))
		}
	}
	return nil
}

func damaged(path, what string) error {
	return fmt.Errorf("%w: database file %s: %s; restore it from a backup (ingot admin restore) or move it away to start empty", store.ErrDamaged, path, what)
}

// walk reads every key of every bucket, so a damaged page is found when
// the store opens rather than when a DHCP request or an API call reaches
// it. bbolt panics on some damaged pages; guard turns that into an error.
func walk(db *bbolt.DB) error {
	return db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return walkBucket(b) })
	})
}

func walkBucket(b *bbolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				return walkBucket(sub)
			}
		}
		return nil
	})
}

// guard runs fn and turns a panic inside bbolt (a damaged page it read),
// or a memory fault (a damaged page that sent it outside the map), into
// ErrDamaged naming the file. Faults become panics only on goroutines
// that ask (debug.SetPanicOnFault): this one does for fn; faultSafe does
// it on the goroutine bbolt runs a batch on.
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = damaged(path, fmt.Sprintf("reading it failed: %v", p))
		}
	}()
	return fn()
}

// faultSafe is guard for transactions bbolt may run on a goroutine of its
// own (db.Batch): fn, with panics and memory faults turned into ErrDamaged.
func faultSafe(path string, fn func(*bbolt.Tx) error) func(*bbolt.Tx) error {
	return func(tx *bbolt.Tx) error { return guard(path, func() error { return fn(tx) }) }
}
