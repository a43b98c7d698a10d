package pacecore

import "time"

// schedule hands out turns 1/rate apart, first come first served (GCRA
// with no burst), none before a server's pause ends. A cut or a pause
// begins a new generation: the old one's turns are void.
type schedule struct {
	next   time.Time // no turn before this: the one after the last handed out
	paused time.Time // no turn before this either: the server's pause
	gen    uint64
}

// take hands out a turn at rate, unless it would come past deadline.
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

// cancel gives back the turn at at, which set next, if it is the last.
func (s *schedule) cancel(at, next time.Time) {
	if s.next.Equal(next) {
		s.next = at
	}
}

// renew begins a new generation at rate, its first turn one interval
// after now (an attempt went just before).
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
