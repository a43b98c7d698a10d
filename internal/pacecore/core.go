// Package pacecore is the decision core of the adaptive Pacer: what one
// key knows and decides, as plain values. Package pace drives it in
// memory, package redispace over Redis, and the tests on a fake clock,
// all through one driver (see Driver).
package pacecore

import (
	"time"
)

// State is what a Pacer knows of one key and decides from: plain values,
// with no lock, atomic, channel or clock of its own. It changes only
// through Step, which takes the time as a parameter (as x/time/rate's
// AllowN does) and returns what the caller must do about the waits it
// cannot see.
type State struct {
	cfg    *Config
	mode   Mode
	meter  meter     // the attempts and answers of the last buckets
	curve  rateCurve // the rate in force, cut and grown
	sched  schedule  // the turns handed out, and the server's pause
	engage cusum     // while idle: the evidence of a limit
	window window    // slow start's slots
	quota  quota     // the quota the server publishes
	gen    genTally  // the answers of attempts paced at the rate in force
	// half and halfBefore are those paced since the rate in force was
	// halfFrom, and over the half before (see cut).
	half, halfBefore genTally
	halfFrom         float64
	// floor is the share of refusals found not to depend on the rate
	// (random shedding): refusals up to it engage nothing and cut nothing.
	floor float64
	// chainStart is when the first refusal since the last success came,
	// and chainRate the rate the client went at then (see outage); zero
	// after a success.
	chainStart time.Time
	chainRate  float64
}

// Config is what a key's decisions take from the Pacer's settings.
type Config struct {
	Adapt         Adapt
	MinRate       float64 // requests per second; must be positive
	InitialWindow int     // 0 or less: no slow start
}

// Adapt is how the rate is adjusted after refusals (see package pace's
// Adapt, whose values these are).
type Adapt uint8

const (
	Cubic Adapt = iota // CUBIC (RFC 9438), the AWS SDKs' adaptive mode
	AIMD               // additive increase, multiplicative decrease
)

// Mode is where a key stands: the transition table (Step) is a switch
// on it.
//
//	SlowStart -> Idle   an answer no attempt waits for, or SlowStartLimit
//	Idle      -> Paced  the evidence of a limit (the meter's buckets, each
//	                    weighed whole), while something is accepted; a
//	                    success saying the quota is spent
//	SlowStart -> Paced  likewise
//	Paced     -> Idle   a chain of cuts that halved the rate, the share
//	                    refused not falling with it: random shedding, its
//	                    share the floor
//	Paced     -> Idle   nothing accepted for as long as an outage
type Mode uint8

const (
	// Idle: attempts go unpaced; answers are weighed (see cusum).
	Idle Mode = iota
	// SlowStart: a new key's attempts go unpaced, at most the window's
	// slots of them unanswered at once.
	SlowStart
	// Paced: attempts take turns at the rate in force; refusals cut it,
	// time grows it.
	Paced
)

func (m Mode) String() string {
	return [...]string{"idle", "slow start", "paced"}[m]
}

// Engaged reports whether the key paces its attempts.
func (s *State) Engaged() bool { return s.mode == Paced }

// New returns a new key's state, in slow start if cfg has a window. The
// state keeps cfg, which must not change after.
func New(cfg *Config) State {
	s := State{cfg: cfg}
	s.engage.cold()
	if cfg.InitialWindow > 0 {
		s.mode = SlowStart
		s.window.slots = cfg.InitialWindow
	}
	return s
}

// Kind names what happened to the key.
type Kind uint8

const (
	Reserve Kind = iota // an attempt asks for its turn, by Deadline
	Answer              // an attempt's outcome
	Cancel              // an attempt gives its turn (At, Next) back, unsent
	Release             // an attempt gives its slot of slow start back, unsent
)

// Event is one input of Step.
type Event struct {
	Kind Kind
	// Sent and OK are the attempts sent and the successes the driver
	// counted without a step since the last one: every event carries
	// them in.
	Sent, OK int64

	Deadline time.Time // Reserve: zero when none
	At, Next time.Time // Cancel: the turn's time, and the next turn's it set

	// Answer: accepted, or refused for the rate (neither only gives back
	// a slot). Gen is the generation of the rate the attempt was paced
	// at (0: not paced), Slot whether it held a slot of slow start.
	Accepted, Refused bool
	Gen               uint64
	Slot              bool
	// Wait, when Hinted, is how long the server asked its clients to
	// hold off.
	Hinted bool
	Wait   time.Duration
	// Quota is the quota the answer published, if any.
	Quota Quota
}

// Effects is what a step asks of the driver, and what it answers.
type Effects struct {
	// Void: the turns handed out are void, their waiters take new ones.
	// Wake: a slot of slow start freed, or slow start ended.
	Void, Wake bool
	Grant      // Reserve's answer
}

// Grant answers Reserve. Go: the attempt goes now, unpaced, holding a
// slot of slow start if Slot. Paced: it goes at At, Wait from now, on the
// turns of generation Gen (Next is the turn after, for Cancel). WaitSlot:
// slow start's window is full; it waits for Wake, or until Until, and
// asks again. TooLate: its turn would come past the deadline, Wait from
// now; no turn was taken.
type Grant struct {
	Go, Slot, Paced, WaitSlot, TooLate bool
	Wait                               time.Duration
	At, Next, Until                    time.Time
	Gen                                uint64
}

// Step applies ev at now and returns its effects. Times are only ever
// compared with each other: any clock will do, as long as it is the same
// for every step of a key.
func (s *State) Step(now time.Time, ev Event) Effects {
	var fx Effects
	ended, rolled := s.meter.count(now, ev.Sent, ev.OK)
	if s.mode == SlowStart && s.window.over(now) {
		s.mode, fx.Wake = Idle, true
	}
	if ev.Kind == Answer && (ev.Accepted || ev.Refused) {
		// A refusal under a published quota is the quota's, which now
		// holds the key until its reset: it says nothing of a rate.
		spent := ev.Refused && !ev.Quota.Reset.IsZero()
		s.meter.answer(now, ev.Refused, spent)
		wake, void := s.spread(now, ev)
		fx.Wake, fx.Void = fx.Wake || wake, fx.Void || void
		ev.Refused = ev.Refused && !spent
	}
	answered := ev.Kind == Answer && (ev.Accepted || ev.Refused)
	engaged := false // by this step's evidence
	if s.mode != Paced {
		if rolled {
			s.engage.add(ended.refused, ended.ok, s.floor)
		}
		if s.limited() {
			fx.Wake = fx.Wake || s.mode == SlowStart
			s.start(now)
			fx.Void, engaged = true, true
		}
	}
	switch ev.Kind {
	case Reserve:
		fx.Grant = s.reserve(now, ev.Deadline)
	case Cancel:
		s.sched.cancel(ev.At, ev.Next)
	case Release:
		fx.Wake = s.window.release(false) || fx.Wake
	case Answer:
		if ev.Slot {
			fx.Wake = s.window.release(ev.Accepted) || fx.Wake
			if s.window.answered() && s.mode == SlowStart {
				s.mode, fx.Wake = Idle, true // the window holds the demand
			}
		}
		if answered {
			wasSlow := s.mode == SlowStart
			fx.Void = s.answer(now, ev, engaged) || fx.Void
			fx.Wake = fx.Wake || wasSlow && s.mode != SlowStart
		}
	}
	return fx
}

// reserve hands out the turn of an attempt about to be sent at now.
func (s *State) reserve(now, deadline time.Time) Grant {
	if g, ok := s.reserveQuota(now, deadline); ok {
		return g
	}
	switch s.mode {
	case SlowStart:
		return s.window.take(now)
	case Idle:
		if !s.sched.paused.After(now) {
			return Grant{Go: true}
		}
	}
	return s.sched.take(now, s.Rate(now), deadline)
}

// answer learns from an attempt's answer, accepted or refused for the
// rate, which engaged the key if engaged. It reports whether the turns
// handed out are void.
func (s *State) answer(now time.Time, ev Event, engaged bool) (void bool) {
	refused := ev.Refused
	switch {
	case !refused:
		s.chainStart, s.chainRate = time.Time{}, 0
	case s.chainStart.IsZero():
		s.chainStart, s.chainRate = now, max(s.Rate(now), s.meter.sendRate(now))
	}
	current := ev.Gen != 0 && ev.Gen == s.sched.gen
	if current {
		s.gen.add(refused)
		s.half.add(refused)
	}
	limit := engaged // the answer is a limit's: it engaged the key or cut its rate
	if s.mode == Paced && !engaged {
		switch {
		case s.outage(now, refused):
			s.disengage()
			void = true
		case current && refused && s.gen.over(s.floor):
			s.cut(now, s.Rate(now))
			limit = true
		}
	}
	// A server's wait holds every attempt of the key when the refusal
	// that asked for it is a limit's, or a success says the quota is
	// spent. A refusal that is not (random throttling) holds only its own
	// request's retry, which the Transport waits out: pausing the key for
	// each would stop every other call as often as the server throttles.
	if ev.Hinted && ev.Wait > 0 && (limit && s.Engaged() || !refused) {
		if !s.Engaged() {
			s.start(now)
		}
		s.sched.pause(now.Add(ev.Wait))
		limit = true
	}
	return void || limit
}

// start engages the key, its rate cut from the rate the client was
// sending at.
func (s *State) start(now time.Time) {
	s.curve = rateCurve{}
	s.halfFrom, s.half, s.halfBefore = 0, genTally{}, genTally{}
	s.cut(now, s.meter.sendRate(now))
}

// cut cuts the rate from from, the rate in force or the client's, and
// begins a new generation of turns (see rateCurve.cut). Each time a
// chain of cuts halves the rate, the share refused over this half is
// held against the half before: a limit refuses fewer as the rate falls
// towards it, and a share that did not fall by half, below a limit's, is
// random shedding, which would otherwise cut the rate down to MinRate.
func (s *State) cut(now time.Time, from float64) {
	accepted, samples := s.meter.accepted(now)
	s.curve.cut(now, from, accepted, samples, s.cfg)
	s.sched.renew(now, s.curve.base)
	s.gen = genTally{}
	s.mode = Paced
	if s.halfFrom != 0 { // a chain of cuts under way: has it halved the rate?
		if s.curve.base > s.halfFrom/2 {
			return
		}
		if lower, upper := s.half.share(), s.halfBefore.share(); lower < engageHigh && lower >= upper/2 {
			s.floor = (s.half.k + s.halfBefore.k) / (s.half.n + s.halfBefore.n)
			s.disengage()
			return
		}
	}
	s.halfFrom, s.halfBefore, s.half = s.curve.base, s.half, genTally{}
}

// disengage returns an engaged key to idle, its rate forgotten.
func (s *State) disengage() {
	s.mode = Idle
	s.engage.reset()
	s.sched.renew(time.Time{}, 0)
}

// limited reports whether an idle key holds the evidence of a limit: the
// buckets weighed so far, or with the bucket under way if its answers
// decide whatever the rest of them say, while something is accepted.
func (s *State) limited() bool {
	open := s.meter.open()
	return (s.engage.s >= evidence || s.engage.sure(open.refused, open.ok, s.meter.unanswered(), s.floor)) && s.accepting()
}

// accepting reports whether the server accepts anything now: a limit
// does, an outage does not.
func (s *State) accepting() bool { return s.meter.sum().ok > 0 }

// outage reports whether an engaged key's refusals are an outage's:
// nothing accepted since the first of them, for outageTime and for the
// time minSamples answers take at the rate the client went at then (a
// slow limit's successes are far apart), an hour at most.
func (s *State) outage(now time.Time, refused bool) bool {
	if !refused || s.chainStart.IsZero() {
		return false
	}
	quiet := outageTime
	if s.chainRate > 0 {
		quiet = max(quiet, time.Duration(min(minSamples/s.chainRate, time.Hour.Seconds())*float64(time.Second)))
	}
	return now.Sub(s.chainStart) >= quiet
}

// Rate returns the rate in force at now, in requests per second: 0 while
// the key is not engaged.
func (s *State) Rate(now time.Time) float64 {
	if s.mode != Paced {
		return 0
	}
	return max(s.curve.at(now, s.cfg), s.cfg.MinRate)
}

// Mode returns where the key stands.
func (s *State) Mode() Mode { return s.mode }

// Gen returns the generation of the turns handed out now.
func (s *State) Gen() uint64 { return s.sched.gen }

// Stale reports whether the turns of generation gen are void.
func (s *State) Stale(gen uint64) bool { return gen != s.sched.gen }

// Calm reports whether a success at now changes nothing but the count
// the driver keeps without a step: the key is idle, holds no evidence of
// a limit, and its meter's bucket lasts.
func (s *State) Calm(now time.Time) bool {
	return s.mode == Idle && s.engage.s == 0 && s.meter.inBucket(now)
}

// Unpaced reports whether an attempt at now goes without a turn and
// without a step but its count: the key is idle, not paused, and no
// published quota binds.
func (s *State) Unpaced(now time.Time) bool {
	return s.mode == Idle && !s.sched.paused.After(now) && !s.quota.spreading
}

// BucketEnd returns when the meter's current bucket ends; zero before
// the first event.
func (s *State) BucketEnd() time.Time { return s.meter.end() }
