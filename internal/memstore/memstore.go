// Package memstore keeps the Pacer's keys in memory: the pacing core's
// Store for one process (package pace's Pacer, and the Transport's own).
// Redis's is package redispace's.
package memstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry/internal/clock"
	"github.com/backoff-jitter/retry/internal/keytable"
	"github.com/backoff-jitter/retry/internal/pacecore"
)

// Store keeps a process's keys in a bounded table (see keytable). Set
// Config before first use. It is safe for concurrent use.
type Store struct {
	Config pacecore.Config
	// MaxKeys bounds the keys remembered while unused; zero means
	// keytable.DefaultMax.
	MaxKeys int
	// Now and Sleep are the clock; nil means the real one.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Owner is the Pacer the store belongs to, for its keys' turns.
	Owner any

	once  sync.Once
	table keytable.Table[Key]
}

func (s *Store) init() {
	s.once.Do(func() {
		s.table.Max, s.table.Now = s.MaxKeys, s.Now
		s.table.New = func(string) *Key {
			k := &Key{store: s, st: pacecore.New(&s.Config)}
			k.born = s.now()
			k.mirror()
			return k
		}
		// An engaged key is worth keeping: it learned a rate.
		s.table.Keep = func(k *Key) bool { return !k.unpaced.Load() }
	})
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Open implements pacecore.Store.
func (s *Store) Open(key string) pacecore.Handle { return s.OpenKey(key) }

// OpenKey is Open with its concrete type: a *Key converts to an
// adapter's turn type without an allocation.
func (s *Store) OpenKey(key string) *Key {
	s.init()
	e := s.table.Use(key)
	k := e.Value
	if k.entry.Load() == nil {
		k.entry.Store(e)
	}
	return k
}

// Peek calls f with key's state at now, under its lock, if the store
// holds the key.
func (s *Store) Peek(key string, f func(st *pacecore.State, now time.Time)) bool {
	s.init()
	e := s.table.Peek(key)
	if e == nil {
		return false
	}
	e.Value.Read(f)
	return true
}

// Range calls f with each key the store holds, until f returns false.
func (s *Store) Range(f func(key string, k *Key) bool) {
	s.init()
	s.table.Range(f)
}

// Read calls f with k's state at now, under k's lock.
func (k *Key) Read(f func(st *pacecore.State, now time.Time)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f(&k.st, k.store.now())
}

// Len returns how many keys the store holds.
func (s *Store) Len() int { return s.table.Len() }

// Key is a key of a Store: its state, the lock that guards it, and
// what the state cannot hold: the mirrors and counts of the lock-free
// path, and the waits.
type Key struct {
	store *Store
	entry atomic.Pointer[keytable.Entry[Key]]
	born  time.Time // the lock-free path's times are nanoseconds after it

	// The lock-free path reads unpaced and calmUntil, which mirror the
	// state after each step, and counts its attempts in sent and its
	// successes in ok; the next step carries the counts into the state.
	unpaced   atomic.Bool
	calmUntil atomic.Int64

	mu sync.Mutex
	st pacecore.State
	// turns is done when the turns handed out are void, wake when a slot
	// may have freed; each made when an attempt first waits on it.
	turns, wake             context.Context
	cancelTurns, cancelWake context.CancelFunc

	// Written by every attempt, so kept away from what every attempt
	// reads, whose cache line would otherwise move between the cores.
	_        [64]byte
	sent, ok atomic.Int64
}

// mirror copies the state's lock-free view. k.mu is held, or k is new.
func (k *Key) mirror() {
	now := k.store.now()
	if u := k.st.Unpaced(now); k.unpaced.Load() != u {
		k.unpaced.Store(u)
	}
	var calm int64
	if k.st.Calm(now) {
		calm = int64(k.st.BucketEnd().Sub(k.born))
	}
	if k.calmUntil.Load() != calm {
		k.calmUntil.Store(calm)
	}
}

// Unpaced implements pacecore.Handle.
func (k *Key) Unpaced() bool {
	if k.unpaced.Load() {
		k.sent.Add(1)
		return true
	}
	return false
}

// Calm implements pacecore.Handle.
func (k *Key) Calm() bool {
	if until := k.calmUntil.Load(); until != 0 && int64(k.store.now().Sub(k.born)) < until {
		k.ok.Add(1)
		return true
	}
	return false
}

// Sent implements pacecore.Handle.
func (k *Key) Sent() { k.sent.Add(1) }

// Step implements pacecore.Handle.
func (k *Key) Step(_ context.Context, ev pacecore.Event) (pacecore.Effects, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ev.Sent, ev.OK = k.sent.Swap(0), k.ok.Swap(0)
	fx := k.st.Step(k.store.now(), ev)
	if fx.Void && k.cancelTurns != nil {
		k.cancelTurns()
		k.turns, k.cancelTurns = nil, nil
	}
	if fx.Wake && k.cancelWake != nil {
		k.cancelWake()
		k.wake, k.cancelWake = nil, nil
	}
	k.mirror()
	return fx, nil
}

// Await implements pacecore.Handle.
func (k *Key) Await(ctx context.Context, g pacecore.Grant) (bool, error) {
	k.mu.Lock()
	var on context.Context
	d := g.Wait
	switch {
	case g.Paced && k.st.Stale(g.Gen):
		k.mu.Unlock()
		return true, nil
	case g.Paced:
		if k.turns == nil {
			k.turns, k.cancelTurns = context.WithCancel(context.Background())
		}
		on = k.turns
	default:
		if k.wake == nil {
			k.wake, k.cancelWake = context.WithCancel(context.Background())
		}
		on, d = k.wake, g.Until.Sub(k.store.now())
	}
	k.mu.Unlock()
	if d <= 0 {
		return false, ctx.Err()
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(on, cancel)
	defer stop()
	sleep := k.store.Sleep
	if sleep == nil {
		sleep = clock.Sleep
	}
	if err := sleep(wctx, d); err != nil {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return on.Err() != nil && g.Paced, nil // woken: void turns, or a slot
	}
	return false, nil
}

// Owner returns the store's Owner.
func (k *Key) Owner() any { return k.store.Owner }

// Close implements pacecore.Handle.
func (k *Key) Close() { k.store.table.Done(k.entry.Load()) }
