// Package pacecore is the decision core of the adaptive Pacer: what one
// key knows and decides, as plain values, and the one driver (Wait, Done,
// Abandon) that runs it over a Store: in memory, over Redis, or on the
// simulator's clock.
package pacecore

import "time"

// State is what a Pacer knows of one key: plain values, no lock, channel
// or clock. It changes only through Step, which takes the time (as
// x/time/rate's AllowN does) and returns what the driver must do.
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
	// half: the answers paced since the rate was halfFrom; halfBefore,
	// over the half before (see cut).
	half, halfBefore genTally
	halfFrom         float64
	floor            float64 // the share refused at random (shedding): it engages and cuts nothing
	// chainStart: the first refusal since the last success; chainRate,
	// the client's rate then (see outage).
	chainStart time.Time
	chainRate  float64
}

// Config is the Pacer's settings a key decides with: package pace's and
// package redispace's Pacer fields of the same names.
type Config struct {
	Adapt         Adapt
	MinRate       float64 // requests per second; must be positive
	InitialWindow int     // 0 or less: no slow start
}

// Adapt is how the rate is cut and grown (package pace's Adapt).
type Adapt uint8

const (
	Cubic Adapt = iota // CUBIC (RFC 9438), the AWS SDKs' adaptive mode
	AIMD               // additive increase, multiplicative decrease
)

// Mode is where a key stands; Step is the transition table.
//
//	SlowStart -> Idle    an answer no attempt waits for, or SlowStartLimit
//	Idle, SlowStart      the evidence of a limit (the meter's buckets, each
//	          -> Paced   weighed whole), while something is accepted
//	Paced     -> Idle    a chain of cuts that halved the rate, the share
//	                     refused not falling with it: random shedding, its
//	                     share the floor; or nothing accepted for as long
//	                     as an outage
type Mode uint8

const (
	Idle      Mode = iota // attempts go unpaced; answers are weighed (see cusum)
	SlowStart             // unpaced, at most the window's slots unanswered
	Paced                 // turns at the rate in force: refusals cut it, time grows it
)

func (m Mode) String() string {
	return [...]string{"idle", "slow start", "paced"}[m]
}

// Engaged reports whether the key paces its attempts.
func (s *State) Engaged() bool { return s.mode == Paced }

// New returns a new key's state, in slow start if cfg has a window; cfg
// must not change after.
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
	// Sent and OK: the attempts and successes the driver counted without
	// a step since the last one.
	Sent, OK int64

	Deadline time.Time // Reserve: zero when none
	At, Next time.Time // Cancel: the turn's time, and the next turn's it set

	// Answer: accepted, or refused for the rate (neither only gives back
	// a slot); the generation it was paced at (0: none); whether it held
	// a slot; when Hinted, the server's wait; the quota it published.
	Accepted, Refused bool
	Gen               uint64
	Slot              bool
	Hinted            bool
	Wait              time.Duration
	Quota             Quota
}

// Effects is what a step asks of the driver: Void, the turns handed out
// are void (their waiters take new ones); Wake, the waiters for a slot or
// a quota may ask again. Grant answers Reserve.
type Effects struct {
	Void, Wake bool
	Grant
}

// Grant answers Reserve. Go: now, with a slot if Slot. Paced: at At, Wait
// from now, on generation Gen (Next for Cancel). WaitSlot: wait for Wake
// or Until, and ask again. TooLate: the turn would come past the
// deadline, Wait from now; none was taken.
type Grant struct {
	Go, Slot, Paced, WaitSlot, TooLate bool
	Wait                               time.Duration
	At, Next, Until                    time.Time
	Gen                                uint64
}

// Step applies ev at now and returns its effects. Any clock will do, the
// same for every step of a key.
func (s *State) Step(now time.Time, ev Event) Effects {
	var fx Effects
	ended, rolled := s.meter.count(now, ev.Sent, ev.OK)
	if s.mode == SlowStart && s.window.over(now) {
		s.mode, fx.Wake = Idle, true
	}
	if ev.Kind == Answer && (ev.Accepted || ev.Refused) {
		// A refusal under a published quota is the quota's, not a rate's.
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

// answer learns from an answer, accepted or refused for the rate (which
// engaged the key if engaged), and reports whether the turns are void.
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
	limit := engaged // a limit's answer: it engaged the key or cut its rate
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
	// Only a limit's refusal pauses the key for the server's wait: a random
	// throttle's holds its own retry (the Transport's wait), lest every
	// call stop as often as the server throttles.
	if ev.Hinted && ev.Wait > 0 && limit && s.Engaged() {
		s.sched.pause(now.Add(ev.Wait))
	}
	return void || limit
}

// start engages the key, cut from the rate the client sent at.
func (s *State) start(now time.Time) {
	s.curve = rateCurve{}
	s.halfFrom, s.half, s.halfBefore = 0, genTally{}, genTally{}
	s.cut(now, s.meter.sendRate(now))
}

// cut cuts the rate from from and begins a new generation of turns (see
// rateCurve.cut). Each time a chain of cuts halves the rate, the share
// refused over this half is held against the half before's: a limit
// refuses fewer as the rate falls towards it; a share that did not halve,
// below a limit's, is random shedding, which would cut to MinRate.
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

// limited reports whether an idle key holds the evidence of a limit (the
// bucket under way counts once its answers decide whatever the rest say)
// while something is accepted: a limit accepts, an outage does not.
func (s *State) limited() bool {
	open := s.meter.b[s.meter.head]
	return (s.engage.s >= evidence || s.engage.sure(open.refused, open.ok, s.meter.unanswered(), s.floor)) && s.meter.sum().ok > 0
}

// outage reports whether an engaged key's refusals are an outage's:
// nothing accepted since the first, for outageTime and for minSamples
// answers at the client's rate then (a slow limit's successes are far
// apart), an hour at most.
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

// Rate returns the rate in force at now, per second; 0 unless engaged.
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

// Calm reports whether a success at now is only counted, without a
// step: the key is idle, holds no evidence, and its bucket lasts.
func (s *State) Calm(now time.Time) bool {
	return s.mode == Idle && s.engage.s == 0 && s.meter.inBucket(now)
}

// Unpaced reports whether an attempt at now goes without a step: the
// key is idle, not paused, and no published quota binds.
func (s *State) Unpaced(now time.Time) bool {
	return s.mode == Idle && !s.sched.paused.After(now) && !s.quota.spreading
}

// BucketEnd returns when the meter's bucket ends; zero before any event.
func (s *State) BucketEnd() time.Time { return s.meter.end() }
