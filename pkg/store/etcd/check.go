package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Check reads the whole prefix at one revision and returns every broken
// invariant of the layout, joined: a unique key whose machine is missing
// or does not hold it, a machine whose key is missing, an IP index entry
// whose lease does not hold the IP, a snapshot or event above its
// machine's counter or of no machine, a job or token index entry that
// does not match its record, a job or token missing from its index.
func (s *Store) Check(ctx context.Context) error {
	var errs []error
	err := s.view(ctx, func(t *tx) error {
		errs = nil
		c := &checker{t: t, machines: map[string]*machineKeys{}}
		for _, step := range []func() error{c.readMachines, c.checkIndexes, c.checkSeqs("inv/", "invseq/"),
			c.checkSeqs("ev/", "evseq/"), c.checkLeases, c.checkJobIndex, c.checkTokenIndexes} {
			if err := step(); err != nil {
				return err
			}
		}
		errs = c.errs
		return nil
	})
	if err != nil {
		return fmt.Errorf("checking %s: %w", s.k.p, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("checking %s: %w", s.k.p, errors.Join(errs...))
	}
	return nil
}

type machineKeys struct {
	keys  map[string]bool
	found map[string]bool
}

type checker struct {
	t        *tx
	machines map[string]*machineKeys
	errs     []error
}

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) readMachines() error {
	p := c.t.s.k.machines()
	return c.t.scanPrefix(p, false, func(kv *mvccpb.KeyValue) error {
		m, err := decodeMachine(kv.Value)
		if err != nil {
			c.fail("%s: %v", kv.Key, err)
			return nil
		}
		id := strings.TrimPrefix(string(kv.Key), p)
		if m.ID != id {
			c.fail("%s holds machine %s", kv.Key, m.ID)
		}
		mk := &machineKeys{keys: map[string]bool{}, found: map[string]bool{}}
		for _, u := range store.MachineKeys(m) {
			mk.keys[c.t.s.k.unique(u)] = true
		}
		c.machines[id] = mk
		return nil
	})
}

func (c *checker) checkIndexes() error {
	err := c.t.scanPrefix(c.t.s.k.p+"k/", false, func(kv *mvccpb.KeyValue) error {
		m, ok := c.machines[string(kv.Value)]
		switch {
		case !ok:
			c.fail("unique key %s points to missing machine %s", kv.Key, kv.Value)
		case !m.keys[string(kv.Key)]:
			c.fail("unique key %s points to machine %s, which does not hold it", kv.Key, kv.Value)
		default:
			m.found[string(kv.Key)] = true
		}
		return nil
	})
	for id, m := range c.machines {
		for k := range m.keys {
			if !m.found[k] {
				c.fail("machine %s holds %s, but the key is missing", id, k)
			}
		}
	}
	return err
}

// checkSeqs checks records <prefix><id>/<seq> against counters <cprefix><id>.
func (c *checker) checkSeqs(prefix, cprefix string) func() error {
	return func() error {
		counters := map[string]uint64{}
		cp := c.t.s.k.p + cprefix
		err := c.t.scanPrefix(cp, false, func(kv *mvccpb.KeyValue) error {
			n, err := strconv.ParseUint(string(kv.Value), 10, 64)
			if err != nil {
				c.fail("counter %s is %q", kv.Key, kv.Value)
			}
			counters[strings.TrimPrefix(string(kv.Key), cp)] = n
			return nil
		})
		if err != nil {
			return err
		}
		p := c.t.s.k.p + prefix
		return c.t.scanPrefix(p, true, func(kv *mvccpb.KeyValue) error {
			id, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), p), "/")
			seq, err := parseSeqKey(string(kv.Key))
			switch {
			case err != nil:
				c.fail("record %s: %v", kv.Key, err)
			case c.machines[id] == nil:
				c.fail("record %s of missing machine %s", kv.Key, id)
			case seq > counters[id]:
				c.fail("record %s is above its counter %d", kv.Key, counters[id])
			}
			return nil
		})
	}
}

func (c *checker) checkLeases() error {
	byMAC := map[string]netip.Addr{}
	lp := c.t.s.k.leases()
	err := c.t.scanPrefix(lp, false, func(kv *mvccpb.KeyValue) error {
		l, err := decodeLease(kv.Value)
		if err != nil || l.MAC != strings.TrimPrefix(string(kv.Key), lp) {
			c.fail("lease %s: %v (MAC %v)", kv.Key, err, l)
			return nil
		}
		byMAC[l.MAC] = l.IP
		return nil
	})
	if err != nil {
		return err
	}
	// A lease the index does not point to is allowed: a MAC whose expired
	// lease gave its address to another keeps its record.
	ip := c.t.s.k.p + "lip/"
	err = c.t.scanPrefix(ip, false, func(kv *mvccpb.KeyValue) error {
		addr := strings.TrimPrefix(string(kv.Key), ip)
		if got, ok := byMAC[string(kv.Value)]; !ok || got.String() != addr {
			c.fail("IP index %s points to %s, whose lease does not hold it", addr, kv.Value)
		}
		return nil
	})
	return err
}

// checkIndex compares the index entries under prefix (keys
// prefix<value>/<id>) with want (each record's entry key, "" for none).
func (c *checker) checkIndex(prefix, what string, want map[string]string) error {
	have := map[string]bool{}
	err := c.t.scanPrefix(prefix, true, func(kv *mvccpb.KeyValue) error {
		have[string(kv.Key)] = true
		return nil
	})
	if err != nil {
		return err
	}
	wanted := map[string]bool{}
	for id, k := range want {
		if k == "" {
			continue
		}
		wanted[k] = true
		if !have[k] {
			c.fail("%s %s has no %s index entry", what, id, prefix)
		}
	}
	for k := range have {
		if !wanted[k] {
			// Named by its value only: a token's entry ends in its hash.
			value := strings.TrimPrefix(k[:strings.LastIndexByte(k, '/')], prefix)
			c.fail("an index entry of %s%s/ matches no %s", prefix, value, what)
		}
	}
	return nil
}

// checkJobIndex checks the job state index against the jobs.
func (c *checker) checkJobIndex() error {
	want := map[string]string{}
	err := c.t.scanPrefix(c.t.s.k.jobs(), false, func(kv *mvccpb.KeyValue) error {
		j, err := decodeJob(kv.Value, kv.ModRevision)
		if err != nil {
			c.fail("%s: %v", kv.Key, err)
			return nil
		}
		want[j.ID] = c.t.s.k.jobState(string(j.State), j.ID)
		return nil
	})
	if err != nil {
		return err
	}
	return c.checkIndex(c.t.s.k.p+"js/", "job", want)
}

// checkTokenIndexes checks the token scope and job indexes against the
// tokens (named by their ID, never their hash).
func (c *checker) checkTokenIndexes() error {
	scopes, jobs := map[string]string{}, map[string]string{}
	err := c.t.scanPrefix(c.t.s.k.tokens(), false, func(kv *mvccpb.KeyValue) error {
		var tk store.Token
		if err := json.Unmarshal(kv.Value, &tk); err != nil {
			c.fail("a token record: %v", err)
			return nil
		}
		scopes[tk.ID] = c.t.s.k.tokenScopes(tk.Scope) + tk.Hash
		if tk.JobID != "" {
			jobs[tk.ID] = c.t.s.k.tokenJobs(tk.JobID) + tk.Hash
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.checkIndex(c.t.s.k.p+"tsc/", "token", scopes); err != nil {
		return err
	}
	return c.checkIndex(c.t.s.k.p+"tj/", "token", jobs)
}
