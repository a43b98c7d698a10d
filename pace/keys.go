package pace

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry/internal/pacecore"
)

// The key table is bounded: a Pacer keyed by host, tenant or account
// sees keys come and go for the life of the process, and each costs its
// state. A key with nothing in flight or waiting is forgotten once unused
// for keyIdleAge, and, when the table holds more than MaxKeys keys, the
// longest unused are forgotten first, those that never engaged before
// those that did, until a quarter of MaxKeys is free. A forgotten key
// that comes back starts afresh, as a new one.
const (
	// defaultMaxKeys is MaxKeys when it is zero.
	defaultMaxKeys = 10_000
	// keyIdleAge is how long an unused key is remembered. What it learned
	// is the rate of a server it has not talked to since: after this
	// long, a new slow start finds the rate again in a few round trips.
	keyIdleAge = 10 * time.Minute
	// sweepEvery is the most often a new key makes the table look for
	// keys unused for keyIdleAge, while it holds no more than MaxKeys.
	sweepEvery = time.Minute
	// lastGrain is the precision of a key's last use.
	lastGrain = time.Second
)

// keyTable is the Pacer's map of keys to their states, with the
// bookkeeping that bounds it.
type keyTable struct {
	m     sync.Map     // key string -> *entry
	count atomic.Int64 // keys in m
	// sweeping is held by the one goroutine sweeping; lastSweep is when
	// the last sweep began, under sweeping.
	sweeping  sync.Mutex
	lastSweep time.Time
	// inUse is how many keys the last sweep left because they were in
	// use, when that kept the table above MaxKeys; 0 otherwise. Under
	// sweeping. Until the table grows a quarter of MaxKeys past it, a
	// sweep would find the same keys in use: without it, every new key
	// swept the whole table while more keys than MaxKeys were in use.
	inUse  int64
	sweeps int // for the tests
}

// use is a key's bookkeeping for the table: whether it is in use, and
// since when it is not.
type use struct {
	// forgotten is set when the table drops the key: an attempt that
	// found it in the table just before starts again from the table.
	forgotten atomic.Bool
	born      time.Time    // when the key was created, on the Pacer's clock
	last      atomic.Int64 // when its last attempt ended: nanoseconds after born
}

// key returns the limit req counts against.
func (p *Pacer) key(req *http.Request) string {
	switch {
	case p.Key != nil:
		return p.Key(req)
	case req.URL != nil:
		return req.URL.Host
	}
	return ""
}

// maxKeys returns MaxKeys, or its default.
func (p *Pacer) maxKeys() int64 {
	if p.MaxKeys > 0 {
		return int64(p.MaxKeys)
	}
	return defaultMaxKeys
}

// state returns req's key's entry, made on first use.
func (p *Pacer) state(req *http.Request) *entry {
	s, _ := p.lookup(p.key(req), false)
	return s
}

// acquire returns req's key's entry, counting the attempt in its use
// until finish.
func (p *Pacer) acquire(req *http.Request) *entry {
	key := p.key(req)
	for {
		s, made := p.lookup(key, true)
		if made {
			return s
		}
		s.active.Add(1)
		if !s.use.forgotten.Load() {
			return s
		}
		// Dropped from the table between the lookup and the count: the
		// table holds a new state for the key, or will on the next
		// lookup.
		s.active.Add(-1)
	}
}

// lookup returns key's entry, and whether this call made it. An entry
// made for an attempt (inUse) is stored with the attempt counted, so that
// the sweep its arrival may start never forgets it.
func (p *Pacer) lookup(key string, inUse bool) (*entry, bool) {
	if s, ok := p.keys.m.Load(key); ok {
		return s.(*entry), false
	}
	now := p.clock()
	fresh := &entry{p: p, st: pacecore.New(p.config())}
	fresh.use.born = now
	fresh.slow.Store(fresh.st.Mode() == pacecore.ModeSlowStart)
	if inUse {
		fresh.active.Store(1)
	}
	s, loaded := p.keys.m.LoadOrStore(key, fresh)
	if loaded {
		return s.(*entry), false
	}
	p.keys.added(p, now)
	return fresh, inUse
}

// since returns t in nanoseconds after s was made: a monotonic reading
// when both times have one, as the real clock's do.
func (s *entry) since(t time.Time) int64 { return int64(t.Sub(s.use.born)) }

// finish ends the use that acquire began, at now: the key was last used
// when its last attempt ended.
func (s *entry) finish(now time.Time) {
	// Stored at most once per lastGrain: a store on every answer would
	// keep the cache line of the fast path's loads (engaged) moving
	// between the cores.
	if at := s.since(now); at-s.use.last.Load() >= int64(lastGrain) {
		s.use.last.Store(at)
	}
	s.active.Add(-1)
}

// added counts a new key, and sweeps the table when it holds too many
// or has not been swept for sweepEvery. One goroutine sweeps at a time;
// the others go on.
func (t *keyTable) added(p *Pacer, now time.Time) {
	n := t.count.Add(1)
	if !t.sweeping.TryLock() {
		return
	}
	defer t.sweeping.Unlock()
	limit := p.maxKeys()
	// Over the limit; and, when keys in use kept the last sweep above
	// it, grown a quarter of the limit since.
	over := n > limit && n >= t.inUse+max(limit/4, 1)
	if !over && !t.lastSweep.IsZero() && now.Sub(t.lastSweep) < sweepEvery {
		return
	}
	t.lastSweep = now
	t.sweeps++
	t.sweep(now, limit)
	t.inUse = 0
	if left := t.count.Load(); left > limit {
		t.inUse = left
	}
}

// sweep forgets the keys unused for keyIdleAge, then, while the table
// holds more than limit keys, the longest unused until it holds no more
// than three quarters of limit: keys that never engaged first. Keys in
// use are kept, so the table may stay above limit while they are.
func (t *keyTable) sweep(now time.Time, limit int64) {
	type idle struct {
		key     any
		s       *entry
		unused  time.Duration
		engaged bool
	}
	var candidates []idle
	t.m.Range(func(k, v any) bool {
		s := v.(*entry)
		if s.active.Load() != 0 {
			return true
		}
		unused := now.Sub(s.use.born) - time.Duration(s.use.last.Load())
		if unused >= keyIdleAge {
			t.forget(k, s)
			return true
		}
		candidates = append(candidates, idle{k, s, unused, s.engaged.Load()})
		return true
	})
	if t.count.Load() <= limit {
		return
	}
	slices.SortFunc(candidates, func(a, b idle) int {
		if a.engaged != b.engaged {
			if a.engaged {
				return 1
			}
			return -1
		}
		return cmp.Compare(b.unused, a.unused)
	})
	target := limit - limit/4
	for _, c := range candidates {
		if t.count.Load() <= target {
			break
		}
		t.forget(c.key, c.s)
	}
}

// forget drops s, stored under k, unless an attempt began using it. The
// attempt counts itself in active before it reads forgotten, and forget
// sets forgotten before it reads active again, so one of the two sees
// the other: the key is kept, or the attempt looks it up again.
func (t *keyTable) forget(k any, s *entry) {
	s.use.forgotten.Store(true)
	if s.active.Load() != 0 {
		s.use.forgotten.Store(false)
		return
	}
	if t.m.CompareAndDelete(k, s) {
		t.count.Add(-1)
		s.mu.Lock()
		s.dropped()
		s.mu.Unlock()
	}
}

// dropped releases what a forgotten key holds: the timer of its slow
// start. The caller holds s.mu.
func (s *entry) dropped() {
	if s.stopLimit != nil {
		s.stopLimit()
		s.stopLimit = nil
	}
}
