package pace

// slowStart limits a key in modeSlowStart to slots unanswered attempts
// at once.
type slowStart struct {
	inflight int  // attempts holding a slot
	slots    int  // the window: one slot more per success
	waiting  int  // attempts waiting for a slot
	armed    bool // slowStartLimit's timer runs for this slow start
	// round counts the slow starts begun again (see restart): a timer
	// that fired as one began ends nothing.
	round uint64
}

// admit gives an attempt a slot of the window, while the key is in slow
// start and one is free; else, in slow start, the attempt must wait (it
// counts itself among those waiting until evWoke). The first attempt of
// a slow start arms its time limit: attempts that never answer (long
// polls, a hung server) hold their slots, and the others must not wait
// on them for longer than slowStartLimit.
func (s *keyState) admit() (slot, wait bool) {
	if s.mode != modeSlowStart {
		return false, false
	}
	if !s.start.armed {
		s.start.armed = true
		s.fx.armLimit = true
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
func (s *keyState) release(answered bool) {
	s.start.inflight--
	if s.mode != modeSlowStart {
		return
	}
	if answered {
		s.start.slots++
		if s.start.waiting == 0 {
			s.leaveSlowStart()
			return
		}
	}
	s.fx.wake = true
}

// leaveSlowStart ends slow start and lets every waiting attempt go on.
func (s *keyState) leaveSlowStart() {
	if s.mode != modeSlowStart {
		return
	}
	s.mode = modeIdle
	s.fx.stopLimit, s.fx.wake = true, true
}
