package retry

import "time"

// TimerClock is a [Clock] that also runs functions after a time on it, as
// time.AfterFunc does on the real clock: stop cancels the call, and
// reports whether it did (false once f has run or been stopped). Given as
// a Transport's Clock, it drives AttemptTimeout and the bound on
// draining a discarded answer's body as well as the waits between
// attempts; [github.com/backoff-jitter/retry/retrytest.Clock] is one, and
// runs f when it is advanced past f's time.
type TimerClock interface {
	Clock
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// timer is a pending call on the Transport's clock: a real timer, or a
// TimerClock's. The zero timer is none.
type timer struct {
	real *time.Timer
	fake func() bool
}

// afterFunc calls f after d on the Transport's clock.
func (s *settings) afterFunc(d time.Duration, f func()) timer {
	if s.timers != nil {
		return timer{fake: s.timers.AfterFunc(d, f)}
	}
	return timer{real: time.AfterFunc(d, f)}
}

// stop cancels t's call, and reports whether it did.
func (t timer) stop() bool {
	switch {
	case t.real != nil:
		return t.real.Stop()
	case t.fake != nil:
		return t.fake()
	}
	return false
}
