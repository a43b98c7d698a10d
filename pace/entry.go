package pace

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
)

// entry is a key's place in the Pacer: the key's state (see [pacecore.State]),
// the lock that guards it, and what the state cannot hold: the counts of
// the lock-free path, the waits of the attempts, and slow start's timer.
// Every change of the state is a step, taken under the lock (see step),
// whose effects the entry applies.
type entry struct {
	p *Pacer
	// The lock-free path: an idle key's attempts read engaged, slow and
	// bucketEnd without the lock, which mirror the state after each step,
	// and count themselves in sent and, answered within the current
	// bucket, in ok (below); the next step carries the counts into the
	// state.
	engaged atomic.Bool
	slow    atomic.Bool
	// bucketEnd is when the current bucket ends (0: none yet), in
	// nanoseconds after the key was made (see since): a monotonic
	// reading, as every comparison of times in the state is, so that a
	// step of the wall clock cannot hold the bucket open.
	bucketEnd atomic.Int64

	use use // the key table's bookkeeping (see keyTable)

	mu sync.Mutex
	st pacecore.State
	// wake is closed when a slot frees or slow start ends, unheld when
	// the hold ends, turns when the turns handed out are void; each nil
	// until an attempt waits on it.
	wake        chan struct{}
	unheld      chan struct{}
	turns       context.Context
	cancelTurns context.CancelFunc
	stopLimit   func() bool // stops slow start's timer; nil when none runs

	// Written by every attempt, so kept away from the fields every
	// attempt reads (the state between them), whose cache line would
	// otherwise move between the cores with each write.
	sent atomic.Int64
	ok   atomic.Int64
	// active counts the attempts between Wait and their turn's Done or
	// Abandon, waits included: the key table never forgets a key with
	// any (see keyTable).
	active atomic.Int64
}

// step applies ev to the key's state at now, with the counts of the
// lock-free path, and then its effects. The caller holds e.mu.
func (e *entry) step(now time.Time, ev pacecore.Event) pacecore.Effects {
	ev.Sent, ev.OK = e.sent.Swap(0), e.ok.Swap(0)
	fx := e.st.Step(now, ev)
	e.apply(fx)
	return fx
}

// apply mirrors the state's mode and bucket for the lock-free path, and
// carries out the effects fx. The caller holds e.mu.
func (e *entry) apply(fx pacecore.Effects) {
	if engaged := e.st.Engaged(); e.engaged.Load() != engaged {
		e.engaged.Store(engaged)
	}
	if slow := e.st.Mode() == pacecore.ModeSlowStart; e.slow.Load() != slow {
		e.slow.Store(slow)
	}
	if end := e.st.BucketEnd(); !end.IsZero() {
		e.bucketEnd.Store(e.since(end))
	}
	if fx.StopLimit && e.stopLimit != nil {
		e.stopLimit()
		e.stopLimit = nil
	}
	if fx.ArmLimit {
		e.arm(fx.Round)
	}
	if fx.Void && e.cancelTurns != nil {
		e.cancelTurns()
		e.turns, e.cancelTurns = nil, nil
	}
	if fx.Wake && e.wake != nil {
		close(e.wake)
		e.wake = nil
	}
	if fx.Unhold && e.unheld != nil {
		close(e.unheld)
		e.unheld = nil
	}
}

// arm starts slow start's time limit, for the slow start of round.
func (e *entry) arm(round uint64) {
	after := e.p.afterFunc
	if after == nil {
		after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	e.stopLimit = after(pacecore.SlowStartLimit, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.step(e.p.clock(), pacecore.Event{Kind: pacecore.TimeLimit, Round: round})
	})
}

// admit waits, while the key is in slow start, for a slot of its window,
// and reports whether the attempt took one; the slot is given back with
// the attempt's answer, or by Abandon. Out of slow start it returns at
// once: on a key that has left it, at the cost of one atomic load. The
// wait ends with ctx, and slow start itself ends no later than
// slowStartLimit after its first attempt.
func (e *entry) admit(ctx context.Context) (bool, error) {
	if !e.slow.Load() {
		return false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		fx := e.step(e.p.clock(), pacecore.Event{Kind: pacecore.Admit})
		if !fx.WaitSlot {
			return fx.Slot, nil
		}
		if e.wake == nil {
			e.wake = make(chan struct{})
		}
		wake := e.wake
		e.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		e.mu.Lock()
		e.step(e.p.clock(), pacecore.Event{Kind: pacecore.Woke})
		if err != nil {
			return false, err
		}
	}
}

// reserve takes a turn for an attempt about to be sent at now, by ctx's
// deadline, and returns how long the attempt must wait for it (see
// pacecore.State.reserve). A key that has not engaged returns 0 and a nil
// reservation, at the cost of one atomic load; the deadline is read only
// for a key that has. Past the deadline it returns the wait and false,
// with, while the key is held, a channel closed when the hold ends.
func (e *entry) reserve(ctx context.Context, now time.Time) (time.Duration, *reservation, bool, <-chan struct{}) {
	if !e.engaged.Load() {
		return 0, nil, true, nil
	}
	dl, _ := ctx.Deadline()
	e.mu.Lock()
	defer e.mu.Unlock()
	fx := e.step(now, pacecore.Event{Kind: pacecore.Reserve, Deadline: dl})
	switch {
	case fx.Held:
		if e.unheld == nil {
			e.unheld = make(chan struct{})
		}
		return fx.Turn, nil, false, e.unheld
	case fx.Refused:
		return fx.Turn, nil, false, nil
	case !fx.Paced:
		return 0, nil, true, nil // gone idle since the load
	}
	if e.turns == nil {
		e.turns, e.cancelTurns = context.WithCancel(context.Background())
	}
	return fx.Turn, &reservation{e: e, at: fx.At, next: fx.Next, gen: fx.Gen, turns: e.turns}, true, nil
}

// reservation is a turn handed out by [entry.reserve].
type reservation struct {
	e    *entry
	at   time.Time // when the turn is due
	next time.Time // the next turn's time it set
	gen  uint64    // the generation of the rate the turn was taken at
	// turns is done when the turn is void: its attempt stops waiting
	// for it and takes a new one.
	turns context.Context
}

// cancel gives the turn back (see [pacecore.Cancel]).
func (r *reservation) cancel() {
	if r == nil {
		return
	}
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	r.e.step(r.e.p.clock(), pacecore.Event{Kind: pacecore.Cancel, At: r.at, Next: r.next})
}

// stale reports whether the rate or the pause changed since the turn was
// handed out: its time is void, and the attempt takes a new turn.
func (r *reservation) stale() bool {
	if r == nil {
		return false
	}
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	return r.e.st.Stale(r.gen)
}

// answer takes the outcome f of an attempt paced at generation gen (0:
// not paced), at now, which held a slot of slow start if slot. A success
// of an idle key within the current bucket changes nothing but its
// count, which it makes without the lock.
func (e *entry) answer(f retry.Feedback, slot bool, gen uint64, now time.Time) {
	class := f.Class
	if class == retry.Success {
		e.ok.Add(1)
		if !slot && !f.Hinted && !e.engaged.Load() {
			if end := e.bucketEnd.Load(); end != 0 && e.since(now) < end {
				return
			}
		}
	}
	ev := pacecore.Event{Kind: pacecore.Answer, Slot: slot, Class: class, Answered: f.Response != nil,
		Hinted: f.Hinted, Wait: f.Wait, Gen: gen, ForRate: true}
	if class == retry.Throttled && e.p.Refusal != nil {
		ev.ForRate = e.p.Refusal(f) // the user's code, without the lock
	}
	if !slot && (class != retry.Throttled && class != retry.Success || !ev.ForRate) {
		return // says nothing of the server's rate limit (see pacecore.State.answer)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.step(now, ev)
}

// release gives back a slot of slow start taken for an attempt not sent.
func (e *entry) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.step(e.p.clock(), pacecore.Event{Kind: pacecore.Release})
}
