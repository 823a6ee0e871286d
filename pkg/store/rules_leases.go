package store

import (
	"fmt"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Lease states as stored in Lease.State.
const (
	LeaseOffered  = "offered"
	LeaseBound    = "bound"
	LeaseReleased = "released"
	LeaseDeclined = "declined"
)

// LeaseLive reports whether l holds its address at now: it is offered or
// bound and has not expired (now is before Expires). A released or
// declined lease, or one past Expires, holds nothing. This is the one
// place that decides it: the store's conflict check and the DHCP
// allocator both ask here.
func LeaseLive(l Lease, now time.Time) bool {
	return (l.State == LeaseOffered || l.State == LeaseBound) && now.Before(l.Expires)
}

// NormalizeLease puts l in stored form: MAC in lower-case colon form, IP
// unmapped (an IPv4-mapped IPv6 address becomes IPv4). IP is required.
func NormalizeLease(l Lease) (Lease, error) {
	mac, err := machine.NormalizeMAC(l.MAC)
	if err != nil {
		return Lease{}, err
	}
	if !l.IP.IsValid() {
		return Lease{}, fmt.Errorf("lease for %s: IP is missing", mac)
	}
	l.MAC, l.IP = mac, l.IP.Unmap()
	return l, nil
}

// LeaseConflict returns nil if normalized lease l may be stored at now
// given holder, the current lease of the last MAC to take l.IP (nil when
// none); else ErrConflict naming the holder. A lease of the same MAC, one
// that has moved to another address, or one that is not live (LeaseLive)
// gives way.
func LeaseConflict(holder *Lease, l Lease, now time.Time) error {
	if holder == nil || holder.MAC == l.MAC || holder.IP != l.IP || !LeaseLive(*holder, now) {
		return nil
	}
	return fmt.Errorf("IP %s is leased to %s until %s: %w", l.IP, holder.MAC,
		holder.Expires.UTC().Format(time.RFC3339), ErrConflict)
}
