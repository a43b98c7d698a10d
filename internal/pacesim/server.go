// Package pacesim runs simulations of a Pacer's key on a fake clock: a
// server (a token bucket, a fixed window, random shedding), a queue of
// attempts and clients that back off, and the golden scenarios whose
// traces pin what the decision core decides. The core's tests, package
// pace's and package redispace's replay the same scenarios through their
// own drivers of the core, against the same golden traces (golden.txt).
// It is for tests only.
package pacesim

import (
	"math/rand/v2"
	"time"
)

// Epoch is when every simulation begins.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Server is a server on the fake clock: a token bucket of Rate requests a
// second (0: no limit) with a burst of one (or of 1+Burst, full at the
// first attempt), which also refuses a share Shed of the requests at
// random, whatever the load. With a Window, it is a fixed window limiter
// instead: Quota attempts accepted in each window, counted from the first
// attempt. An attempt sent at a time arrives up to Lag later, at random,
// and never before the one sent before it: the network's and the
// server's own timing.
//
// A share Hinted of the refusals ask the client to hold off for Hint
// (a Retry-After). With QuickRefusals, Clients' refusals are answered at
// once, before the successes sent with them, as a server that refuses
// without doing the work answers.
type Server struct {
	Rate          float64
	Burst         float64
	Shed          float64
	Window        time.Duration
	Quota         int
	Lag           time.Duration
	Hinted        float64
	Hint          time.Duration
	QuickRefusals bool
	Rnd           *rand.Rand

	// Trace, if not nil, records every step of the simulations that run
	// against the server.
	Trace *Trace
	// OnAnswer, if not nil, is called by Run after each answer is
	// observed.
	OnAnswer func()

	tokens   float64
	last     time.Time
	first    time.Time // the window limiter's first attempt
	windowAt int64     // the window counted in used
	used     int
}

// Reply is an attempt's answer: refused or not, and the wait a refusal
// asks for (0: none).
type Reply struct {
	Refused bool
	Hint    time.Duration
}

// Reply answers the attempt sent at at.
func (s *Server) Reply(at time.Time) Reply {
	if !s.Answer(at) {
		return Reply{}
	}
	r := Reply{Refused: true}
	if s.Hinted > 0 && s.Rnd.Float64() < s.Hinted {
		r.Hint = s.Hint
	}
	return r
}

// Answer reports whether the attempt sent at at is refused.
func (s *Server) Answer(at time.Time) (refused bool) {
	if s.Rnd.Float64() < s.Shed {
		return true
	}
	if s.Rate == 0 && s.Window == 0 {
		return false
	}
	if s.Lag > 0 {
		at = at.Add(time.Duration(s.Rnd.Float64() * float64(s.Lag)))
		if at.Before(s.last) {
			at = s.last
		}
	}
	if s.Window > 0 {
		s.last = at
		return s.windowAnswer(at)
	}
	switch {
	case !s.last.IsZero():
		s.tokens = min(1+s.Burst, s.tokens+at.Sub(s.last).Seconds()*s.Rate)
	case s.Burst > 0:
		s.tokens = 1 + s.Burst // a burst's bucket starts full
	}
	s.last = at
	if s.tokens < 1 {
		return true
	}
	s.tokens--
	return false
}

// windowAnswer is Answer's for a fixed window limiter.
func (s *Server) windowAnswer(at time.Time) (refused bool) {
	if s.first.IsZero() {
		s.first = at
	}
	if w := int64(at.Sub(s.first) / s.Window); w != s.windowAt {
		s.windowAt, s.used = w, 0
	}
	if s.used >= s.Quota {
		return true
	}
	s.used++
	return false
}
