// Package keytable is a bounded table of per-key state, for keys that
// come and go for the life of a process: the hosts of a crawler, the
// tenants of a webhook dispatcher. The Pacer, the breaker and hedging's
// latency windows keep their keys in one.
//
// A key with nothing in use is forgotten once unused for IdleAge, and,
// when the table holds more than its bound, the longest unused are
// forgotten first, those the table's Keep prefers last, until a quarter of
// the bound is free. A key in use is never forgotten; a forgotten key that
// comes back starts afresh.
package keytable

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultMax is the bound of a table whose Max is zero.
	DefaultMax = 10_000
	// IdleAge is how long an unused key is remembered: after this long,
	// what it learned is of a server not talked to since.
	IdleAge = 10 * time.Minute
	// sweepEvery is the most often a new key makes the table look for
	// keys unused for IdleAge, while it holds no more than Max.
	sweepEvery = time.Minute
	// lastGrain is the precision of a key's last use.
	lastGrain = time.Second
)

// Table maps keys to their entries of type V. The zero value is an empty
// table with the default bound, on the real clock. It is safe for
// concurrent use.
type Table[V any] struct {
	// Max bounds the keys remembered while unused. Zero means DefaultMax.
	Max int
	// New makes a new key's value. It must not be nil.
	New func(key string) *V
	// Keep, if not nil, reports whether a value is worth keeping longer
	// than others when the table is over Max (a Pacer key that is not
	// idle): those go last.
	Keep func(*V) bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	m     sync.Map // string -> *Entry[V]
	count atomic.Int64
	// sweeping is held by the one goroutine sweeping; lastSweep is when
	// the last sweep began, and inUse how many keys it left in use when
	// they kept the table over Max (0 otherwise): until the table grows a
	// quarter of Max past them, a sweep would find the same keys in use.
	sweeping  sync.Mutex
	lastSweep time.Time
	inUse     int64
}

// Entry is a key's place in the table: its value, and its bookkeeping.
type Entry[V any] struct {
	Value *V
	// active counts the uses begun and not ended; forgotten is set when
	// the table drops the entry.
	active    atomic.Int64
	forgotten atomic.Bool
	born      time.Time    // when the key was made, on the table's clock
	last      atomic.Int64 // when its last use ended: nanoseconds after born
}

func (t *Table[V]) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *Table[V]) max() int64 {
	if t.Max > 0 {
		return int64(t.Max)
	}
	return DefaultMax
}

// Len returns how many keys the table holds.
func (t *Table[V]) Len() int { return int(t.count.Load()) }

// Peek returns key's entry without making it or using it; nil when the
// table holds none.
func (t *Table[V]) Peek(key string) *Entry[V] {
	if e, ok := t.m.Load(key); ok {
		return e.(*Entry[V])
	}
	return nil
}

// Range calls f with each key the table holds and its value, until f
// returns false, as sync.Map's Range does: a key added or dropped
// meanwhile may be seen or not.
func (t *Table[V]) Range(f func(key string, v *V) bool) {
	t.m.Range(func(k, e any) bool { return f(k.(string), e.(*Entry[V]).Value) })
}

// Use returns key's entry, made on first use, counted in use until its
// Done.
func (t *Table[V]) Use(key string) *Entry[V] {
	for {
		if v, ok := t.m.Load(key); ok {
			if e := v.(*Entry[V]); e.hold() {
				return e
			}
			continue
		}
		now := t.now()
		fresh := &Entry[V]{Value: t.New(key), born: now}
		fresh.active.Store(1) // before it is stored: a sweep never drops it
		v, loaded := t.m.LoadOrStore(key, fresh)
		if !loaded {
			t.added(now)
			return fresh
		}
		if e := v.(*Entry[V]); e.hold() {
			return e
		}
	}
}

// hold counts a use of e and reports whether e is still its key's: one
// the table dropped between the lookup and the count is not (the table
// holds a new entry for the key, or will on the next lookup).
func (e *Entry[V]) hold() bool {
	e.active.Add(1)
	if !e.forgotten.Load() {
		return true
	}
	e.active.Add(-1)
	return false
}

// Done ends a use that Use began.
func (t *Table[V]) Done(e *Entry[V]) { t.DoneAt(e, t.now()) }

// DoneAt is Done for a caller that has just read the table's clock: now.
func (t *Table[V]) DoneAt(e *Entry[V], now time.Time) {
	// Stored at most once per lastGrain: a store on every use would keep
	// the entry's cache line moving between the cores.
	if at := int64(now.Sub(e.born)); at-e.last.Load() >= int64(lastGrain) {
		e.last.Store(at)
	}
	e.active.Add(-1)
}

// added counts a new key, and sweeps the table when it holds too many or
// has not been swept for sweepEvery. One goroutine sweeps at a time.
func (t *Table[V]) added(now time.Time) {
	n := t.count.Add(1)
	if !t.sweeping.TryLock() {
		return
	}
	defer t.sweeping.Unlock()
	limit := t.max()
	over := n > limit && n >= t.inUse+max(limit/4, 1)
	if !over && !t.lastSweep.IsZero() && now.Sub(t.lastSweep) < sweepEvery {
		return
	}
	t.lastSweep = now
	t.sweep(now, limit)
	t.inUse = 0
	if left := t.count.Load(); left > limit {
		t.inUse = left
	}
}

// sweep forgets the keys unused for IdleAge, then, while the table holds
// more than limit, the longest unused until it holds three quarters of
// limit: the ones Keep does not prefer first.
func (t *Table[V]) sweep(now time.Time, limit int64) {
	type idle struct {
		key    any
		e      *Entry[V]
		unused time.Duration
		keep   bool
	}
	var candidates []idle
	t.m.Range(func(k, v any) bool {
		e := v.(*Entry[V])
		if e.active.Load() != 0 {
			return true
		}
		unused := now.Sub(e.born) - time.Duration(e.last.Load())
		if unused >= IdleAge {
			t.forget(k, e)
			return true
		}
		candidates = append(candidates, idle{k, e, unused, t.Keep != nil && t.Keep(e.Value)})
		return true
	})
	if t.count.Load() <= limit {
		return
	}
	slices.SortFunc(candidates, func(a, b idle) int {
		if a.keep != b.keep {
			if a.keep {
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
		t.forget(c.key, c.e)
	}
}

// forget drops e, stored under k, unless a use began. A use counts itself
// in active before it reads forgotten, and forget sets forgotten before
// it reads active again, so one of the two sees the other: the entry is
// kept, or the use looks the key up again.
func (t *Table[V]) forget(k any, e *Entry[V]) {
	e.forgotten.Store(true)
	if e.active.Load() != 0 {
		e.forgotten.Store(false)
		return
	}
	if t.m.CompareAndDelete(k, e) {
		t.count.Add(-1)
	}
}
