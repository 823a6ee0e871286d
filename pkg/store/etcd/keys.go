package etcd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/store"
)

// The key layout under the prefix P (a trailing "/" in each name below is
// part of the key). Values are JSON unless noted. Sequence numbers are 16
// lower-case hex digits, so keys sort numerically.
//
//	P meta/layout              "1": the layout version (checked at Open)
//	P meta/restoring           a restore's token while it writes (Open
//	                           refuses the prefix meanwhile)
//	P m/<id>                   machine record; its etcd mod revision is the
//	                           machine's revision
//	P k/<kind>/<value>         unique key -> machine ID; kind is name, mac,
//	                           serial or bmc (store.MachineKeys)
//	P inv/<id>/<seq>           inventory snapshot
//	P invseq/<id>              the last snapshot seq handed out (decimal)
//	P ev/<id>/<seq>            event
//	P evseq/<id>               the last event seq handed out (decimal)
//	P l/<mac>                  DHCP lease
//	P lip/<ip>                 IP -> MAC of the lease that took it last
//	P j/<id>                   job (Revision is its mod revision, not stored)
//	P js/<state>/<id>          "" : the job state index (ListJobs by state)
//	P t/<sha256 hex>           API token
//	P tsc/<scope>/<hash>       "" : tokens by scope (FindTokens)
//	P tj/<job>/<hash>          "" : tokens by job (FindTokens)
//	P f/<key>                  fence value (store.FenceStore: "job/<id>" ->
//	                           the member ID of the instance that owns it)
//	P inst/<name>/<lease hex>  a live instance (Member), under its lease
//	P elect/<name>/...         etcd elections (concurrency.Election): the
//	                           maintenance leader, DHCP segments
//	P s/<shard>                sealed secrets, a JSON map name -> Secret;
//	                           secretShards shards by FNV of the name
//	P tn/<machine>             telemetry node state (opaque bytes)
//	P tp/<machine>/<day>       power day (opaque bytes)
//	P ts/<machine>/<day>       daily power summary (opaque bytes)
//	P rcp/<instance name>      the recipes an instance has in force, recipe
//	                           name -> digest, under its member lease
//
// The name keys (k/name/<name>) are also the name index ListMachines
// pages through: a page reads its names and then their records, never the
// fleet.
//
// A machine's inventory, events and their counters go with it on delete,
// in the same transaction.

// layoutVersion is the layout this binary reads and writes.
const layoutVersion = 1

// keys builds the keys of one store (one prefix).
type keys struct{ p string }

func (k keys) layout() string           { return k.p + "meta/layout" }
func (k keys) restoring() string        { return k.p + "meta/restoring" }
func (k keys) machine(id string) string { return k.p + "m/" + id }
func (k keys) machines() string         { return k.p + "m/" }

// unique is the key of a unique key of a machine.
func (k keys) unique(u store.UniqueKey) string { return k.p + "k/" + keyKind(u.Kind) + "/" + u.Value }

func (k keys) name(name string) string {
	return k.unique(store.UniqueKey{Kind: store.KeyName, Value: name})
}

func keyKind(kind store.KeyKind) string {
	switch kind {
	case store.KeyName:
		return "name"
	case store.KeyMAC:
		return "mac"
	case store.KeySerial:
		return "serial"
	case store.KeyBMC:
		return "bmc"
	}
	panic(fmt.Sprintf("etcd store: unknown key kind %q", kind))
}

func (k keys) inventories(id string) string           { return k.p + "inv/" + id + "/" }
func (k keys) inventory(id string, seq uint64) string { return k.inventories(id) + seqKey(seq) }
func (k keys) invSeq(id string) string                { return k.p + "invseq/" + id }
func (k keys) events(id string) string                { return k.p + "ev/" + id + "/" }
func (k keys) event(id string, seq uint64) string     { return k.events(id) + seqKey(seq) }
func (k keys) evSeq(id string) string                 { return k.p + "evseq/" + id }
func (k keys) lease(mac string) string                { return k.p + "l/" + mac }
func (k keys) leases() string                         { return k.p + "l/" }
func (k keys) leaseIP(ip string) string               { return k.p + "lip/" + ip }
func (k keys) job(id string) string                   { return k.p + "j/" + id }
func (k keys) jobs() string                           { return k.p + "j/" }
func (k keys) names() string                          { return k.p + "k/name/" }
func (k keys) jobState(state, id string) string       { return k.jobStates(state) + id }
func (k keys) jobStates(state string) string          { return k.p + "js/" + state + "/" }
func (k keys) token(hash string) string               { return k.p + "t/" + hash }
func (k keys) tokens() string                         { return k.p + "t/" }
func (k keys) tokenScopes(scope string) string        { return k.p + "tsc/" + scope + "/" }
func (k keys) tokenJobs(job string) string            { return k.p + "tj/" + job + "/" }
func (k keys) fence(key string) string                { return k.p + "f/" + key }
func (k keys) fences() string                         { return k.p + "f/" }
func (k keys) member(id string) string                { return k.members() + id }
func (k keys) members() string                        { return k.p + "inst/" }
func (k keys) election(name string) string            { return k.p + "elect/" + name }
func (k keys) secretShard(n int) string               { return k.p + "s/" + strconv.Itoa(n) }
func (k keys) secrets() string                        { return k.p + "s/" }
func (k keys) nodes() string                          { return k.p + "tn/" }
func (k keys) node(machine string) string             { return k.nodes() + machine }
func (k keys) powerDays() string                      { return k.p + "tp/" }
func (k keys) powerSums() string                      { return k.p + "ts/" }
func (k keys) recipes(instance string) string         { return k.recipesAll() + instance }
func (k keys) recipesAll() string                     { return k.p + "rcp/" }

// day is the key of a machine's day under a telemetry prefix (powerDays or
// powerSums).
func day(prefix, machine, d string) string { return prefix + machine + "/" + d }

// seqKey is seq as 16 hex digits.
func seqKey(seq uint64) string { return fmt.Sprintf("%016x", seq) }

// parseSeqKey reads the seq at the end of key.
func parseSeqKey(key string) (uint64, error) {
	i := strings.LastIndexByte(key, '/')
	return strconv.ParseUint(key[i+1:], 16, 64)
}

// prefixEnd is the end of the range of keys starting with prefix (etcd's
// clientv3.GetPrefixRangeEnd, for a prefix that is never empty here).
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}
