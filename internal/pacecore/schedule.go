package pacecore

import "time"

// schedule hands out an engaged key's turns, one interval (1/rate)
// apart, first come first served (GCRA with no burst), none before the
// end of a server's pause. The turns of one rate are a generation: a cut
// or a pause begins a new one, and the turns of the old are void.
type schedule struct {
	next   time.Time // no turn before this: the one after the last handed out
	paused time.Time // no turn before this either: the server's pause
	gen    uint64
}

// take hands out the turn of an attempt at now, at rate, unless it would
// come past deadline (zero: none): then it takes nothing.
func (s *schedule) take(now time.Time, rate float64, deadline time.Time) Grant {
	at := now
	if s.next.After(at) {
		at = s.next
	}
	if s.paused.After(at) {
		at = s.paused
	}
	wait := at.Sub(now)
	if !deadline.IsZero() && at.After(deadline) {
		return Grant{TooLate: true, Wait: wait}
	}
	next := at
	if rate > 0 {
		next = at.Add(time.Duration(float64(time.Second) / rate))
	}
	s.next = next
	return Grant{Paced: true, Wait: wait, At: at, Next: next, Gen: s.gen}
}

// cancel gives back a turn at at, which set next, unless a later one
// was handed out since: one in the middle of the schedule stays spent,
// which only spaces the attempts a little more.
func (s *schedule) cancel(at, next time.Time) {
	if s.next.Equal(next) {
		s.next = at
	}
}

// renew begins a new generation of turns at rate, the first one interval
// after now (an attempt went just before): the turns handed out are
// void, and their attempts take new ones.
func (s *schedule) renew(now time.Time, rate float64) {
	s.gen++
	s.next = now
	if rate > 0 && !now.IsZero() {
		s.next = now.Add(time.Duration(float64(time.Second) / rate))
	}
}

// pause holds every turn until until, the server's word.
func (s *schedule) pause(until time.Time) {
	if until.After(s.paused) {
		s.paused = until
	}
	s.gen++
}
