package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// bbolt's page layout (go.etcd.io/bbolt internal/common): a 16-byte header
// (id uint64, flags uint16, count uint16, overflow uint32), then count
// elements. A branch element is (pos uint32, ksize uint32, child uint64),
// a leaf element (flags uint32, pos uint32, ksize uint32, vsize uint32);
// pos counts from the element itself. A leaf element with bucketLeafFlag
// holds a bucket: (root uint64, sequence uint64), and when root is 0 the
// bucket's only page inline after it.
const (
	branchPage     = 0x01
	leafPage       = 0x02
	metaPage       = 0x04
	freelistPage   = 0x10
	elementSize    = 16
	bucketLeafFlag = 0x01
	bucketHeader   = 16
	noFreelist     = ^uint64(0)
	// maxDepth bounds how deep buckets and B-trees may nest: a real store
	// is a few levels deep; damage that loops is stopped here.
	maxDepth = 64
)

// pageWalk checks a closed bbolt file's pages before bbolt maps it: every
// page the meta reaches, read with plain reads (never mapped), must say
// what bbolt will assume of it (its own id, a page type, a count and
// elements that fit, children inside the file, no page reached twice),
// so that damage becomes an error naming the page instead of a fault, a
// panic, a loop or an allocation without bound inside bbolt.
type pageWalk struct {
	f        io.ReaderAt
	pageSize int
	pages    uint64 // the high-water mark: ids must be below it
	seen     map[uint64]bool
}

// checkPages walks the file at path from the meta page m.
func checkPages(path string, m boltMeta, root, freelist uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := &pageWalk{f: f, pageSize: int(m.pageSize), pages: m.pgid, seen: map[uint64]bool{0: true, 1: true}}
	if err := w.tree(root, 0); err != nil {
		return err
	}
	if freelist != noFreelist {
		return w.freelist(freelist)
	}
	return nil
}

// read returns page id with its overflow pages, checked as a page.
func (w *pageWalk) read(id uint64) ([]byte, error) {
	if id < 2 || id >= w.pages {
		return nil, fmt.Errorf("page %d is outside the file's %d pages", id, w.pages)
	}
	if w.seen[id] {
		return nil, fmt.Errorf("page %d is reached twice (a loop or a shared page)", id)
	}
	w.seen[id] = true
	head := make([]byte, w.pageSize)
	if _, err := w.f.ReadAt(head, int64(id)*int64(w.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(head); got != id {
		return nil, fmt.Errorf("page %d names itself page %d", id, got)
	}
	overflow := uint64(le.Uint32(head[12:]))
	if id+overflow >= w.pages {
		return nil, fmt.Errorf("page %d runs %d overflow pages past the file's %d pages", id, overflow, w.pages)
	}
	if overflow == 0 {
		return head, nil
	}
	for o := id + 1; o <= id+overflow; o++ {
		w.seen[o] = true
	}
	buf := make([]byte, (1+int(overflow))*w.pageSize)
	if _, err := w.f.ReadAt(buf, int64(id)*int64(w.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d with its %d overflow pages: %w", id, overflow, err)
	}
	return buf, nil
}

// tree checks the B-tree rooted at page id.
func (w *pageWalk) tree(id uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d is %d levels deep: the tree loops", id, depth)
	}
	p, err := w.read(id)
	if err != nil {
		return err
	}
	return w.node(p, id, depth)
}

// node checks one branch or leaf page p (a page of the file, or a
// bucket's inline page).
func (w *pageWalk) node(p []byte, id uint64, depth int) error {
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if flags != branchPage && flags != leafPage {
		return fmt.Errorf("page %d has type %#x where a branch (0x01) or leaf (0x02) page belongs", id, flags)
	}
	if 16+count*elementSize > len(p) {
		return fmt.Errorf("page %d counts %d elements, more than its %d bytes hold", id, count, len(p))
	}
	for i := range count {
		at := 16 + i*elementSize
		e := p[at : at+elementSize]
		if flags == branchPage {
			pos, ksize, child := int(le.Uint32(e)), int(le.Uint32(e[4:])), le.Uint64(e[8:])
			if at+pos+ksize > len(p) {
				return fmt.Errorf("page %d: branch element %d's key runs past the page", id, i)
			}
			if err := w.tree(child, depth+1); err != nil {
				return err
			}
			continue
		}
		eflags, pos, ksize, vsize := le.Uint32(e), int(le.Uint32(e[4:])), int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
		if at+pos+ksize+vsize > len(p) || pos < 0 {
			return fmt.Errorf("page %d: leaf element %d's key and value run past the page", id, i)
		}
		if eflags&bucketLeafFlag != 0 {
			if err := w.bucket(p[at+pos+ksize:at+pos+ksize+vsize], id, i, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// bucket checks a bucket's value: its header and its root, on a page of
// its own or inline.
func (w *pageWalk) bucket(v []byte, id uint64, i, depth int) error {
	if len(v) < bucketHeader {
		return fmt.Errorf("page %d: element %d is a bucket of %d bytes, less than its header", id, i, len(v))
	}
	root := binary.LittleEndian.Uint64(v)
	if root != 0 {
		return w.tree(root, depth+1)
	}
	inline := v[bucketHeader:]
	if len(inline) < 16 {
		return fmt.Errorf("page %d: element %d's inline bucket has no page", id, i)
	}
	if binary.LittleEndian.Uint16(inline[8:]) != leafPage {
		return fmt.Errorf("page %d: element %d's inline bucket is not a leaf page", id, i)
	}
	if depth+1 > maxDepth {
		return errors.New("buckets nest deeper than any store of ingot's")
	}
	return w.node(inline, id, depth+1)
}

// freelist checks the free page list's page and the ids it lists.
func (w *pageWalk) freelist(id uint64) error {
	p, err := w.read(id)
	if err != nil {
		return fmt.Errorf("free list: %w", err)
	}
	le := binary.LittleEndian
	if flags := le.Uint16(p[8:]); flags != freelistPage {
		return fmt.Errorf("free list page %d has type %#x, not 0x10", id, flags)
	}
	count, at := int(le.Uint16(p[10:])), 16
	if count == 0xFFFF { // the real count is the first element
		count, at = int(le.Uint64(p[16:])), 24
	}
	if count < 0 || at+count*8 > len(p) {
		return fmt.Errorf("free list page %d counts %d ids, more than it holds", id, count)
	}
	for i := range count {
		if free := le.Uint64(p[at+i*8:]); free < 2 || free >= w.pages {
			return fmt.Errorf("free list page %d lists page %d, outside the file's %d pages", id, free, w.pages)
		}
	}
	return nil
}
