package pacecore

import "time"

// slowStart limits a key in ModeSlowStart to slots unanswered attempts
// at once.
type slowStart struct {
	inflight int // attempts holding a slot
	slots    int // the window: one slot more per success
	waiting  int // attempts waiting for a slot
	// began is when the slow start's first attempt took a slot (zero:
	// none yet): it ends SlowStartLimit after (see over).
	began time.Time
	// round counts the slow starts begun again (see restart): a timer
	// that fired as one began ends nothing.
	round uint64
}

// admit gives an attempt a slot of the window, while the key is in slow
// start and one is free; else, in slow start, the attempt must wait (it
// counts itself among those waiting until Woke). The first attempt of a
// slow start begins its time limit: attempts that never answer (long
// polls, a hung server) hold their slots, and the others must not wait
// on them for longer than SlowStartLimit.
func (s *State) admit(now time.Time) (slot, wait bool) {
	if s.mode != ModeSlowStart {
		return false, false
	}
	if s.start.began.IsZero() {
		s.start.began = now
		s.fx.ArmLimit = true
	}
	if s.start.inflight >= s.start.slots {
		s.start.waiting++
		return false, true
	}
	s.start.inflight++
	return true, false
}

// release gives back a slow-start slot. An answer opens one slot more
// (the window doubles every round trip, as TCP's slow start does), and an
// answer that nothing is waiting for ends slow start: the window no
// longer limits the client.
func (s *State) release(answered bool) {
	s.start.inflight--
	if s.mode != ModeSlowStart {
		return
	}
	if answered {
		s.start.slots++
		if s.start.waiting == 0 {
			s.leaveSlowStart()
			return
		}
	}
	s.fx.Wake = true
}

// over reports whether the time limit of the slow start under way has
// passed at now. A step that finds it so ends slow start (see Step), and
// a driver with waits to wake arms a timer for it (Signals.ArmLimit).
func (sl *slowStart) over(now time.Time) bool {
	return !sl.began.IsZero() && !now.Before(sl.began.Add(SlowStartLimit))
}

// leaveSlowStart ends slow start and lets every waiting attempt go on.
func (s *State) leaveSlowStart() {
	if s.mode != ModeSlowStart {
		return
	}
	s.mode = ModeIdle
	s.fx.StopLimit, s.fx.Wake = true, true
}
