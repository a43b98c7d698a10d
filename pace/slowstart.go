package pace

import (
	"context"
	"sync/atomic"
	"time"
)

// slowStart limits a key that has not engaged to slots unanswered
// attempts at once.
type slowStart struct {
	slow      atomic.Bool   // in slow start
	inflight  int           // attempts holding a slot
	slots     int           // the window: one slot more per success
	waiting   int           // attempts waiting for a slot
	wake      chan struct{} // closed when a slot frees or slow start ends
	stopLimit func() bool   // stops the timer of slowStartLimit
	// round counts the slow starts begun again (see restart): a timer
	// that fired as one began, and waited for the lock, ends nothing.
	round uint64
}

// admit waits, while s is in slow start, for a slot of its window, and
// reports whether the attempt took one; the slot is given back by
// [Pacer.observeState] or [keyState.release]. Out of slow start it
// returns at once: on a key that has left it, at the cost of one atomic
// load. The wait ends with ctx, and slow start itself ends no later than
// slowStartLimit after its first attempt.
func (p *Pacer) admit(ctx context.Context, s *keyState) (bool, error) {
	if !s.start.slow.Load() {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start.stopLimit == nil && s.start.slow.Load() {
		after := p.afterFunc
		if after == nil {
			after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
		}
		round := s.start.round
		s.start.stopLimit = after(slowStartLimit, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.start.round == round { // not a slow start begun since
				s.leaveSlowStart()
			}
		})
	}
	for s.start.slow.Load() && s.start.inflight >= s.start.slots {
		if s.start.wake == nil {
			s.start.wake = make(chan struct{})
		}
		wake := s.start.wake
		s.start.waiting++
		s.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		s.mu.Lock()
		s.start.waiting--
		if err != nil {
			return false, err
		}
	}
	if !s.start.slow.Load() {
		return false, nil
	}
	s.start.inflight++
	return true, nil
}

// release gives back a slow-start slot. An answer opens one slot more
// (the window doubles every round trip, as TCP's slow start does), and an
// answer that nothing is waiting for ends slow start: the window no
// longer limits the client.
func (s *keyState) release(answered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start.inflight--
	if !s.start.slow.Load() {
		return
	}
	if answered {
		s.start.slots++
		if s.start.waiting == 0 {
			s.leaveSlowStart()
			return
		}
	}
	s.wakeAll()
}

// leaveSlowStart ends slow start and lets every waiting attempt go on.
// The caller holds s.mu.
func (s *keyState) leaveSlowStart() {
	if !s.start.slow.Load() {
		return
	}
	s.start.slow.Store(false)
	if s.start.stopLimit != nil {
		s.start.stopLimit()
	}
	s.wakeAll()
}

// wakeAll wakes the attempts waiting for a slot, to look again.
func (s *keyState) wakeAll() {
	if s.start.wake != nil {
		close(s.start.wake)
		s.start.wake = nil
	}
}
