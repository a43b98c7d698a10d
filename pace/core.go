package pace

import (
	"time"

	"github.com/backoff-jitter/retry"
)

// keyState is what a Pacer knows of one key and decides from: plain
// values, with no lock, atomic, channel or clock of its own. It changes
// only through step, which takes the time as a parameter (as
// x/time/rate's AllowN does) and returns what the caller must do about
// the waits it cannot see (see effects). The Pacer's entry for the key
// (see entry) holds the lock, the counts of the lock-free path, the
// channels and the timer, and applies the effects.
type keyState struct {
	cfg    *config
	mode   mode
	fx     signals // raised by the step under way
	start  slowStart
	sched  schedule
	rate   rateCurve
	meter  meter
	outage outage
	shed   shedding
}

// config is what a key's decisions take from the Pacer's settings.
type config struct {
	adapt         Adapt
	minRate       float64
	initialWindow int // 0 or less: no slow start
}

// mode is where a key stands. A new key starts in slow start, or idle
// when slow start is off; answer and the time limit move it:
//
//	slow start -> idle        an answer no attempt waits for, or slowStartLimit
//	slow start -> paced       a throttle that engages the key, or a server hint
//	idle       -> paced       likewise (see suspect)
//	paced      -> held        cuts with no success ever, down to outageShare
//	held       -> paced       a success
//	paced      -> idle        its refusals found not to depend on the rate
//	paced/held -> slow start  the success that ends an outage (idle with
//	                          slow start off)
//
// While paced, a test of shedding may be under way (see
// shedding.testing): a chain of cuts, watched in stages of its own.
type mode uint8

const (
	// modeIdle: not engaged; attempts go unpaced and are counted.
	modeIdle mode = iota
	// modeSlowStart: not engaged, and at most the window's slots of
	// attempts unanswered at once (see slowStart).
	modeSlowStart
	// modePaced: engaged; attempts take turns at the rate in force.
	modePaced
	// modeHeld: engaged, refused from the first attempt on: the rate
	// probes at outageShare of the first cut's until a success, and a
	// wait past a deadline waits for the hold to end (see reserve).
	modeHeld
)

// engaged reports whether the key paces its attempts.
func (s *keyState) engaged() bool { return s.mode >= modePaced }

// newKeyState returns a new key's state, in slow start unless cfg turns
// it off.
func newKeyState(cfg *config) keyState {
	s := keyState{cfg: cfg, mode: modeIdle}
	s.meter.suspicion = coldSuspicion
	if cfg.initialWindow > 0 {
		s.start.slots = cfg.initialWindow
		s.mode = modeSlowStart
	}
	return s
}

// eventKind names what happened to the key.
type eventKind uint8

const (
	evAnswer  eventKind = iota // an attempt's outcome (answer)
	evAdmit                    // an attempt asks for a slot of slow start
	evWoke                     // an attempt that waited for a slot looks again
	evRelease                  // an attempt gives its slot back unanswered
	evLimit                    // slow start's time limit, of round, is up
	evReserve                  // an attempt asks for a turn, by deadline
	evCancel                   // an attempt gives its turn (at, next) back
)

// event is one input of step.
type event struct {
	kind eventKind
	// sent and ok are the attempts sent and the successes counted without
	// the lock since the last step: every event carries them in.
	sent, ok int64

	// evAnswer: the outcome of an attempt paced at generation gen (0:
	// not paced), which held a slot of slow start if slot.
	slot  bool
	class retry.Class
	// answered: a response came (a transport error is no answer).
	answered bool
	// forRate: a throttle refused the attempt for its rate (see
	// Pacer.Refusal); meaningless for other classes.
	forRate bool
	hinted  bool          // the server said when to come back
	wait    time.Duration // and how long that is
	gen     uint64

	deadline time.Time // evReserve: zero when none
	at, next time.Time // evCancel: the turn's time, and the next it set
	round    uint64    // evLimit
}

// signals are the effects on the waits that a step's mechanisms raise.
type signals struct {
	void      bool // the turns handed out are void: wake their waits
	wake      bool // a slot freed, or slow start ended: wake the waits for slots
	unhold    bool // the hold ended: wake the waits for it
	armLimit  bool // start slow start's time limit
	stopLimit bool // stop slow start's time limit
}

// effects is what a step asks of the caller, and what it answers.
type effects struct {
	signals
	round uint64 // armLimit: the slow start the time limit ends
	// evAdmit: took a slot, or must wait for one (evWoke when woken).
	slot, waitSlot bool
	grant          // evReserve
}

// grant answers evReserve: the wait for the turn, and the turn when one
// was handed out (paced); past the deadline, refused, or, while held,
// held (the attempt waits for the hold to end, with no turn).
type grant struct {
	turn           time.Duration
	paced, refused bool
	held           bool
	at, next       time.Time
	gen            uint64
}

// step applies ev, at now, and returns its effects.
func (s *keyState) step(now time.Time, ev event) effects {
	var out effects
	s.meter.count(ev.sent, ev.ok)
	switch ev.kind {
	case evAnswer:
		s.answer(now, ev)
	case evAdmit:
		out.slot, out.waitSlot = s.admit()
	case evWoke:
		s.start.waiting--
	case evRelease:
		s.release(false)
	case evLimit:
		if ev.round == s.start.round { // not a slow start begun since
			s.leaveSlowStart()
		}
	case evReserve:
		out.grant = s.reserve(now, ev.deadline)
	case evCancel:
		// The turn is given back if no later one was handed out since:
		// one in the middle of the schedule stays spent, which only
		// spaces the attempts a little more.
		if s.sched.next.Equal(ev.next) {
			s.sched.next = ev.at
		}
	}
	out.signals = s.signals()
	if out.armLimit {
		out.round = s.start.round
	}
	return out
}

// signals returns the signals raised since the last call, and clears
// them.
func (s *keyState) signals() signals {
	fx := s.fx
	s.fx = signals{}
	return fx
}

// stale reports whether the turns of generation gen are void: the rate
// or the pause changed since one was handed out.
func (s *keyState) stale(gen uint64) bool { return gen != s.sched.gen }
