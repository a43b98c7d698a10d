package pacecore

import (
	"time"

	"github.com/backoff-jitter/retry"
)

// State is what a Pacer knows of one key and decides from: plain
// values, with no lock, atomic, channel or clock of its own. It changes
// only through step, which takes the time as a parameter (as
// x/time/rate's AllowN does) and returns what the caller must do about
// the waits it cannot see (see effects). The Pacer's entry for the key
// (see entry) holds the lock, the counts of the lock-free path, the
// channels and the timer, and applies the effects.
type State struct {
	cfg    *Config
	mode   Mode
	fx     Signals // raised by the step under way
	start  slowStart
	sched  schedule
	rate   rateCurve
	meter  meter
	outage outage
	shed   shedding
}

// Config is what a key's decisions take from the Pacer's settings.
type Config struct {
	Adapt         Adapt
	MinRate       float64 // requests per second; must be positive
	InitialWindow int     // 0 or less: no slow start
}

// Adapt is how the rate is adjusted after throttling (see package pace's
// Adapt, whose values these are).
type Adapt uint8

const (
	Cubic Adapt = iota // CUBIC (RFC 9438), the AWS SDKs' adaptive mode
	AIMD               // additive increase, multiplicative decrease
)

// mode is where a key stands. A new key starts in slow start, or idle
// when slow start is off; answer and the time limit move it:
//
//	slow start -> idle        an answer no attempt waits for, or SlowStartLimit
//	slow start -> paced       a throttle that engages the key, or a server hint
//	idle       -> paced       likewise (see suspect)
//	paced      -> held        cuts with no success ever, down to outageShare;
//	                          or a silence as long as an outage's (outageOver)
//	held       -> paced       a success
//	paced      -> idle        its refusals found not to depend on the rate
//	paced/held -> slow start  the success that ends an outage (idle with
//	                          slow start off)
//
// While paced, a test of shedding may be under way (see
// shedding.testing): a chain of cuts, watched in stages of its own.
type Mode uint8

const (
	// ModeIdle: not engaged; attempts go unpaced and are counted.
	ModeIdle Mode = iota
	// ModeSlowStart: not engaged, and at most the window's slots of
	// attempts unanswered at once (see slowStart).
	ModeSlowStart
	// ModePaced: engaged; attempts take turns at the rate in force.
	ModePaced
	// ModeHeld: engaged, and refused from the first attempt on (the
	// rate probes at outageShare of the first cut's) or for as long as
	// an outage (the rate probes where the cuts left it): no throttle
	// cuts until a success, and a wait past a deadline waits for the
	// hold to end (see reserve).
	ModeHeld
)

// Engaged reports whether the key paces its attempts.
func (s *State) Engaged() bool { return s.mode >= ModePaced }

// New returns a new key's state, in slow start unless cfg turns it off.
// The state keeps cfg, which must not change after.
func New(cfg *Config) State {
	s := State{cfg: cfg, mode: ModeIdle}
	s.meter.suspicion = coldSuspicion
	if cfg.InitialWindow > 0 {
		s.start.slots = cfg.InitialWindow
		s.mode = ModeSlowStart
	}
	return s
}

// Kind names what happened to the key.
type Kind uint8

const (
	Answer    Kind = iota // an attempt's outcome (see State.answer)
	Admit                 // an attempt asks for a slot of slow start
	Woke                  // an attempt that waited for a slot looks again
	Release               // an attempt gives its slot back unanswered
	TimeLimit             // slow start's time limit, of Round, is up
	Reserve               // an attempt asks for a turn, by Deadline
	Cancel                // an attempt gives its turn (At, Next) back
)

// Event is one input of Step.
type Event struct {
	Kind Kind
	// Sent and OK are the attempts sent and the successes that the
	// caller counted without a step since the last one: every event
	// carries them in.
	Sent, OK int64

	// Answer: the outcome of an attempt paced at generation Gen (0: not
	// paced), which held a slot of slow start if Slot.
	Slot  bool
	Class retry.Class
	// Answered: a response came (a transport error is no answer).
	Answered bool
	// ForRate: a throttle refused the attempt for its rate (see
	// package pace's Pacer.Refusal); meaningless for other classes.
	ForRate bool
	Hinted  bool          // the server said when to come back
	Wait    time.Duration // and how long that is
	Gen     uint64

	Deadline time.Time // Reserve: zero when none
	At, Next time.Time // Cancel: the turn's time, and the next it set
	Round    uint64    // TimeLimit
}

// Signals are the effects on the waits that a step's mechanisms raise.
type Signals struct {
	Void      bool // the turns handed out are void: wake their waits
	Wake      bool // a slot freed, or slow start ended: wake the waits for slots
	Unhold    bool // the hold ended: wake the waits for it
	ArmLimit  bool // start slow start's time limit (SlowStartLimit from now)
	StopLimit bool // stop slow start's time limit
}

// Effects is what a step asks of the caller, and what it answers.
type Effects struct {
	Signals
	Round uint64 // ArmLimit: the slow start the time limit ends
	// Admit: took a slot, or must wait for one (Woke when woken).
	Slot, WaitSlot bool
	Grant          // Reserve
}

// Grant answers Reserve: the wait for the turn, and the turn when one
// was handed out (Paced); past the deadline, Refused, or, while held,
// Held (the attempt waits for the hold to end, with no turn).
type Grant struct {
	Turn                 time.Duration
	Paced, Refused, Held bool
	At, Next             time.Time // the turn's time, and the next turn's
	Gen                  uint64    // the turns' generation
}

// Step applies ev, at now, and returns its effects. Times are only ever
// compared with each other: any clock will do, as long as it is the same
// one for every step of a key.
func (s *State) Step(now time.Time, ev Event) Effects {
	var out Effects
	s.meter.count(ev.Sent, ev.OK)
	if ev.Kind == Admit {
		s.meter.open(now)
	}
	if s.start.over(now) {
		s.leaveSlowStart()
	}
	switch ev.Kind {
	case Answer:
		s.answer(now, ev)
	case Admit:
		out.Slot, out.WaitSlot = s.admit(now)
	case Woke:
		s.start.waiting--
	case Release:
		s.release(false)
	case TimeLimit:
		if ev.Round == s.start.round { // not a slow start begun since
			s.leaveSlowStart()
		}
	case Reserve:
		out.Grant = s.reserve(now, ev.Deadline)
	case Cancel:
		// The turn is given back if no later one was handed out since:
		// one in the middle of the schedule stays spent, which only
		// spaces the attempts a little more.
		if s.sched.next.Equal(ev.Next) {
			s.sched.next = ev.At
		}
	}
	out.Signals = s.signals()
	if out.ArmLimit {
		out.Round = s.start.round
	}
	return out
}

// signals returns the signals raised since the last call, and clears
// them.
func (s *State) signals() Signals {
	fx := s.fx
	s.fx = Signals{}
	return fx
}

// Stale reports whether the turns of generation gen are void: the rate
// or the pause changed since one was handed out.
func (s *State) Stale(gen uint64) bool { return gen != s.sched.gen }

// Mode returns where the key stands.
func (s *State) Mode() Mode { return s.mode }

// WaitsHeld reports whether an engaged key's waits past a deadline are a
// probe's, held until a success, not refused (see reserve): while the
// key holds its rate through an outage, or before its first success,
// when its rate is a guess from refusals. (A server's pause past the
// deadline is refused even so, except while held.)
func (s *State) WaitsHeld() bool { return s.mode == ModeHeld || s.Engaged() && !s.meter.okOnce }

// Rate returns the rate in force, in requests per second: 0 while the
// key is not engaged.
func (s *State) Rate() float64 { return s.rate.fill }

// Gen returns the generation of the turns handed out now.
func (s *State) Gen() uint64 { return s.sched.gen }

// Paused returns the time before which no attempt goes (zero: none).
func (s *State) Paused() time.Time { return s.sched.paused }

// BucketEnd returns when the current bucket of the meter ends (zero:
// none began yet). Until then an idle key's success changes nothing but
// its count, which its driver may make without a step (Event.OK).
func (s *State) BucketEnd() time.Time {
	if s.meter.bucket.IsZero() {
		return time.Time{}
	}
	return s.meter.bucket.Add(BucketWidth)
}

// Window returns slow start's attempts holding a slot, its slots, and
// the attempts waiting for one.
func (s *State) Window() (inflight, slots, waiting int) {
	return s.start.inflight, s.start.slots, s.start.waiting
}

// SlowStartEnds returns when the slow start under way ends at the
// latest (SlowStartLimit after its first attempt took a slot); zero when
// the key is not in slow start, or its time limit has not begun.
func (s *State) SlowStartEnds() time.Time {
	if s.mode != ModeSlowStart || s.start.began.IsZero() {
		return time.Time{}
	}
	return s.start.began.Add(SlowStartLimit)
}
