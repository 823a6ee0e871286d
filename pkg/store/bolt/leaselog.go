package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// The lease log. A DHCP ACK may leave only once its lease is durable, and a
// bbolt commit is expensive for that: it copies every touched B-tree page,
// writes them and fsyncs twice (measured 0.6 ms alone, 2.5 ms per round of
// ~20 leases under a DHCP load on two cores). So leases are first appended
// to a log beside the database file, <db>.lease-log.<segment>, with one
// fdatasync per round (a few hundred bytes), and reach bbolt later, in one
// transaction per leaseApplyDelay, off the ACK's path.
//
// Every lease mutation (PutLease, PutLeases, DeleteLease) goes through the
// log, in order, so bbolt's lease buckets are always a prefix of the log's
// history applied in order. Reads see bbolt overlaid with the logged
// mutations not yet applied (the overlay, kept in memory).
//
// Segments: the writer appends to the newest segment. The applier seals it
// (starts the next one), applies the sealed segments' mutations in one bbolt
// transaction that also records the last sealed segment number in
// meta/lease_log_applied, then deletes the sealed files. Open replays every
// segment above that number, in order, and deletes them; replaying a
// mutation already applied is harmless (last writer wins per MAC), and a
// segment whose deletion did not survive a crash is skipped by number.
//
// Record format, little-endian: uint32 payload length, uint32 CRC-32C of
// the payload, payload (JSON leaseOp). A record cut short or with a wrong
// checksum at the end of a segment is the round being written when the
// process died (or whose write failed); its writers never got success, so
// it is dropped. Damage with intact records after it is stepped over: the
// records after it are replayed, the stretch is logged with the segment
// and its offsets, and a copy of the segment is kept beside the database
// (SEGMENT.damaged) for a person to look at; DHCP starts either way. A
// segment whose write failed is never written again: writes fail until the
// applier has applied it (so replay skips it) and moved on to a fresh
// segment.

// leaseLogInfix separates the database file name from the segment number.
const leaseLogInfix = ".lease-log."

// maxLeaseRecord bounds a record's payload; a longer length marks a torn or
// corrupt tail.
const maxLeaseRecord = 64 << 10

const leaseRecordHeader = 8

var crc32c = crc32.MakeTable(crc32.Castagnoli)

var kLeaseLogApplied = []byte("lease_log_applied")

// leaseOp is one record: a lease stored, or the lease of a MAC deleted.
type leaseOp struct {
	Put *store.Lease `json:"put,omitempty"`
	Del string       `json:"del,omitempty"` // normalized MAC
}

// mac is the MAC the op is about.
func (op leaseOp) mac() string {
	if op.Put != nil {
		return op.Put.MAC
	}
	return op.Del
}

// appendLeaseRecord appends op's record to buf.
func appendLeaseRecord(buf []byte, op leaseOp) ([]byte, error) {
	payload, err := json.Marshal(op)
	if err != nil {
		return buf, fmt.Errorf("encoding lease log record for %s: %w", op.mac(), err)
	}
	if len(payload) > maxLeaseRecord {
		return buf, fmt.Errorf("lease of %s encodes to %d bytes, more than the lease log's %d (hostname too long?)", op.mac(), len(payload), maxLeaseRecord)
	}
	return frameLeaseRecord(buf, payload), nil
}

// frameLeaseRecord appends payload with its length and checksum to buf.
func frameLeaseRecord(buf, payload []byte) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(payload, crc32c))
	return append(buf, payload...)
}

// decodeLeaseLog returns the ops of one segment in order and the length of
// its valid prefix. A non-nil error says why decoding stopped before the
// end (a torn or corrupt tail), naming the offset.
func decodeLeaseLog(data []byte) (ops []leaseOp, valid int, err error) {
	for off := 0; off < len(data); {
		if len(data)-off < leaseRecordHeader {
			return ops, off, fmt.Errorf("record at offset %d: header cut short (%d of %d bytes)", off, len(data)-off, leaseRecordHeader)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n == 0 || n > maxLeaseRecord {
			return ops, off, fmt.Errorf("record at offset %d: length %d, want 1..%d", off, n, maxLeaseRecord)
		}
		end := off + leaseRecordHeader + n
		if end > len(data) {
			return ops, off, fmt.Errorf("record at offset %d: payload cut short (%d of %d bytes)", off, len(data)-off-leaseRecordHeader, n)
		}
		payload := data[off+leaseRecordHeader : end]
		if got := crc32.Checksum(payload, crc32c); got != sum {
			return ops, off, fmt.Errorf("record at offset %d: checksum %08x, want %08x", off, got, sum)
		}
		op, err := parseLeaseOp(payload)
		if err != nil {
			return ops, off, fmt.Errorf("record at offset %d: %w", off, err)
		}
		ops = append(ops, op)
		off = end
	}
	return ops, len(data), nil
}

// leaseSkip is a damaged stretch of a segment that recovery stepped over.
type leaseSkip struct {
	From, To int // byte offsets: [From, To)
	Why      error
}

// recoverLeaseLog decodes every intact record of a segment. Where a record
// is damaged it resynchronises on the next intact one (a valid header,
// checksum and payload) and records the stretch it stepped over, so damage
// in the middle never takes the acknowledged records after it along. A
// damaged end with nothing intact after it is the record being written
// when the process died or when its write failed: its writer never got
// success, and it is returned as tail, not as a skip.
func recoverLeaseLog(data []byte) (ops []leaseOp, skips []leaseSkip, tail error) {
	for off := 0; off < len(data); {
		got, valid, err := decodeLeaseLog(data[off:])
		ops = append(ops, got...)
		if err == nil {
			return ops, skips, nil
		}
		bad := off + valid
		next := nextLeaseRecord(data, bad+1)
		if next < 0 {
			return ops, skips, fmt.Errorf("at offset %d: %w", bad, err)
		}
		skips = append(skips, leaseSkip{From: bad, To: next, Why: err})
		off = next
	}
	return ops, skips, nil
}

// nextLeaseRecord is the first offset at or after from where an intact
// record starts, -1 if none does.
func nextLeaseRecord(data []byte, from int) int {
	for p := from; p+leaseRecordHeader < len(data); p++ {
		if ops, _, _ := decodeLeaseLog(data[p:]); len(ops) > 0 {
			return p
		}
	}
	return -1
}

// parseLeaseOp decodes and checks one payload: exactly one of put or del,
// a normalized MAC, a valid IP.
func parseLeaseOp(payload []byte) (leaseOp, error) {
	var op leaseOp
	if err := json.Unmarshal(payload, &op); err != nil {
		return op, fmt.Errorf("decoding: %w", err)
	}
	if (op.Put == nil) == (op.Del == "") {
		return op, errors.New(`want exactly one of "put" and "del"`)
	}
	mac := op.mac()
	if norm, err := machine.NormalizeMAC(mac); err != nil || norm != mac {
		return op, fmt.Errorf("MAC %q is not a normalized MAC", mac)
	}
	if op.Put != nil && !op.Put.IP.Is4() && !op.Put.IP.Is6() {
		return op, fmt.Errorf("lease of %s has no IP", mac)
	}
	return op, nil
}

// overlayEntry is a logged mutation not yet applied to bbolt.
type overlayEntry struct {
	seq uint64 // order of logging, for the applier's removal
	seg uint64 // segment that holds it
	op  leaseOp
}

// leaseLog is the open log: the segment being written and the overlay.
type leaseLog struct {
	dir, prefix string // segment files are prefix + number, in dir

	// wmu is held while the segment is written or switched: by the group
	// commit's leader for a whole round, and by the applier to seal.
	wmu       sync.Mutex
	f         *os.File
	seg       uint64
	size      int64
	unapplied uint64 // a sealed segment whose apply failed (0: none)
	broken    error  // a write to segment brokenSeg failed: no writes until it is applied
	brokenSeg uint64

	// The group commit: callers queue; one of them leads a round, then
	// hands the lead to the oldest caller queued meanwhile (logLeases).
	qmu     sync.Mutex
	queue   []*leaseReq
	leading bool
	rounds  atomic.Uint64 // rounds written
	stats   leaseLogCounters
	maxSpan atomic.Uint64 // the most rounds a caller waited for, its own included (tests: <= 2)

	mu    sync.RWMutex   // the overlay
	ops   []overlayEntry // every mutation not yet applied, in logging order
	byMAC map[string]overlayEntry
	byIP  map[netip.Addr]string // IP -> MAC of the overlay's put that took it last
	seq   uint64

	kick chan struct{} // the writer tells the applier there is work
	stop chan struct{}
	done chan struct{} // the applier ended
}

// leaseReq is one caller's mutations in the group commit.
type leaseReq struct {
	ops  []leaseOp
	errs []error       // preset for ops rejected before logging
	wake chan struct{} // closed when written, or when this caller is to lead
	lead bool
	// queued and written are lg.rounds when the request queued and after
	// the round that wrote it.
	queued, written uint64
}

func newLeaseLog(dbPath string) *leaseLog {
	return &leaseLog{
		dir:    filepath.Dir(dbPath),
		prefix: filepath.Base(dbPath) + leaseLogInfix,
		byMAC:  map[string]overlayEntry{},
		byIP:   map[netip.Addr]string{},
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

func (lg *leaseLog) segPath(n uint64) string {
	return filepath.Join(lg.dir, lg.prefix+strconv.FormatUint(n, 10))
}

// keepDamaged logs each damaged stretch of segment n that replay stepped
// over, with its offsets (leases in it are lost: their writers may have
// been told they were stored), and keeps a copy of the segment as
// SEGMENT.damaged for a person to look at.
func (lg *leaseLog) keepDamaged(n uint64, data []byte, skips []leaseSkip, log *slog.Logger) {
	path := lg.segPath(n)
	for _, sk := range skips {
		log.Error("store: lease log segment damaged in the middle; the records after the damage were recovered, the damaged bytes were not",
			"segment", path, "from_offset", sk.From, "to_offset", sk.To, "why", sk.Why, "copy", path+".damaged")
	}
	if err := os.WriteFile(path+".damaged", data, 0o600); err != nil {
		log.Error("store: keeping a copy of a damaged lease log segment", "segment", path, "err", err)
	}
}

// segments lists the segment numbers present, ascending.
func (lg *leaseLog) segments() ([]uint64, error) {
	ents, err := os.ReadDir(lg.dir)
	if err != nil {
		return nil, fmt.Errorf("listing lease log segments in %s: %w", lg.dir, err)
	}
	var out []uint64
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), lg.prefix)
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(rest, 10, 64); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// create starts segment n, empty, and makes its directory entry durable
// (the records' fdatasync covers the file, not its name).
func (lg *leaseLog) create(n uint64) (*os.File, error) {
	f, err := os.OpenFile(lg.segPath(n), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating lease log segment: %w", err)
	}
	if err := durable.SyncDir(lg.dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("creating lease log segment %s: %w", f.Name(), err)
	}
	return f, nil
}

// write appends buf to the segment and makes it durable. After a failure
// the segment is cut back to its previous end (best effort: a failed
// fdatasync leaves the file's state unknown) and no longer written: the
// round's callers were told it failed, and replay must not find later
// acknowledged leases after it. applyLeases heals the log.
func (lg *leaseLog) write(buf []byte) error {
	if lg.broken != nil {
		return lg.broken
	}
	_, err := lg.f.WriteAt(buf, lg.size)
	if err == nil {
		err = unix.Fdatasync(int(lg.f.Fd()))
	}
	if err != nil {
		err = fmt.Errorf("writing lease log %s: %w", lg.f.Name(), err)
		lg.f.Truncate(lg.size)
		lg.broken = fmt.Errorf("lease log %s failed a write and takes no more until it is applied to the database: %w", lg.f.Name(), err)
		lg.brokenSeg = lg.seg
		return err
	}
	lg.size += int64(len(buf))
	return nil
}

// kickApplier tells the applier there is work.
func (lg *leaseLog) kickApplier() {
	select {
	case lg.kick <- struct{}{}:
	default:
	}
}

// remember puts logged ops in the overlay (the caller holds wmu).
func (lg *leaseLog) remember(ops []leaseOp) {
	lg.mu.Lock()
	for _, op := range ops {
		lg.seq++
		mac := op.mac()
		if old, ok := lg.byMAC[mac]; ok && old.op.Put != nil && lg.byIP[old.op.Put.IP] == mac {
			delete(lg.byIP, old.op.Put.IP)
		}
		e := overlayEntry{seq: lg.seq, seg: lg.seg, op: op}
		lg.byMAC[mac] = e
		lg.ops = append(lg.ops, e)
		if op.Put != nil {
			lg.byIP[op.Put.IP] = mac
		}
	}
	lg.mu.Unlock()
	lg.kickApplier()
}

// sealed returns the mutations logged in segments <= seg, in logging order
// (a prefix of lg.ops: segment numbers only grow).
func (lg *leaseLog) sealed(seg uint64) []overlayEntry {
	lg.mu.RLock()
	defer lg.mu.RUnlock()
	n := 0
	for n < len(lg.ops) && lg.ops[n].seg <= seg {
		n++
	}
	return slices.Clone(lg.ops[:n])
}

// forget drops the first n mutations, now applied, from the overlay; the
// by-MAC and by-IP views keep a newer mutation of the same MAC.
func (lg *leaseLog) forget(n int) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, e := range lg.ops[:n] {
		mac := e.op.mac()
		if cur, ok := lg.byMAC[mac]; ok && cur.seq == e.seq {
			delete(lg.byMAC, mac)
			if e.op.Put != nil && lg.byIP[e.op.Put.IP] == mac {
				delete(lg.byIP, e.op.Put.IP)
			}
		}
	}
	lg.ops = slices.Delete(lg.ops, 0, n)
}

// removeUpTo deletes the segment files numbered <= seg.
func (lg *leaseLog) removeUpTo(seg uint64) error {
	segs, err := lg.segments()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range segs {
		if n <= seg {
			if err := os.Remove(lg.segPath(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing applied lease log segment: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// leaseLogCounters count since Open, for LeaseLogStats.
type leaseLogCounters struct {
	mutations, applies, applyErrors, writeErrors atomic.Uint64
	writeNanos, applyNanos                       atomic.Int64
}

// LeaseLogStats are the lease log's counters since Open (for metrics).
type LeaseLogStats struct {
	Rounds       uint64  // rounds written, one fdatasync each
	Mutations    uint64  // lease mutations logged
	WriteErrors  uint64  // rounds whose write failed
	WriteSeconds float64 // time spent writing and syncing rounds
	Applies      uint64  // applies to the database that succeeded
	ApplyErrors  uint64
	ApplySeconds float64
	Pending      int // mutations logged but not yet applied
}
