package pacecore

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Settings are a Pacer's settings that decide: package pace's and package
// redispace's Pacer fields of the same names. Which key a request counts
// against is the adapters' to say: they know the Transport's key.
type Settings struct {
	MinRate       float64
	Adapt         Adapt
	InitialWindow int
}

// Validate reports invalid settings; prefix names the type ("pace:
// Pacer").
func (s *Settings) Validate(prefix string) error {
	switch {
	case s.MinRate < 0 || math.IsNaN(s.MinRate) || math.IsInf(s.MinRate, 0):
		return fmt.Errorf("%s.MinRate %v is not a finite positive rate", prefix, s.MinRate)
	case s.Adapt > AIMD:
		return fmt.Errorf("%s.Adapt %d is not a known algorithm", prefix, s.Adapt)
	}
	return nil
}

// Config returns the settings a key's state decides with.
func (s *Settings) Config() Config {
	c := Config{Adapt: s.Adapt, MinRate: s.MinRate, InitialWindow: s.InitialWindow}
	if c.MinRate <= 0 {
		c.MinRate = DefaultMinRate
	}
	return c
}

// Signal is what an attempt's outcome tells a Pacer: accepted, or refused
// for its rate, or neither (it says nothing of the rate); and, when
// Hinted, how long the server asked its clients to hold off.
type Signal struct {
	Accepted, Refused bool
	Hinted            bool
	Wait              time.Duration
	Quota             Quota // the quota the answer published, if any
}

// Store keeps the states of a Driver's keys: in memory, or in Redis for
// a fleet.
type Store interface {
	// Open returns key's handle for one attempt, which Close ends.
	Open(key string) Handle
}

// Handle is one key of a Store, open for one attempt.
type Handle interface {
	// Unpaced reports, without a step, whether an attempt goes now
	// unpaced (the key is idle and not paused), and if so counts it as
	// sent. It may answer false when it cannot tell: a step decides.
	Unpaced() bool
	// Calm counts a success without a step when the key is calm (see
	// State.Calm), and reports whether it did.
	Calm() bool
	// Step applies ev at the store's time (ev.Deadline is on the
	// process's clock) and returns its effects.
	Step(ctx context.Context, ev Event) (Effects, error)
	// Sent counts an attempt that goes on a grant.
	Sent()
	// Await waits for g: until its turn (Paced), returning true early when
	// the turns are void; or until a slot may have freed, or g.Until
	// (WaitSlot). It returns ctx's error when ctx ends first.
	Await(ctx context.Context, g Grant) (void bool, err error)
	// Close ends the attempt's use of the key.
	Close()
}

// TooLate is the error of a wait that would end past the deadline: Wait
// is how long from the call the turn would have come.
type TooLate struct{ Wait time.Duration }

func (e *TooLate) Error() string {
	return fmt.Sprintf("pacing wait of %v would end past the context's deadline", e.Wait)
}

// Turn is a turn Wait handed out: its key, and what Done and Abandon
// tell it.
type Turn struct {
	H        Handle
	Gen      uint64 // the generation of the rate it was paced at; 0: not paced
	Slot     bool   // it holds a slot of slow start
	At, Next time.Time
}

// Unpaced reports whether the turn went without pacing: no slot, no
// generation.
func (t *Turn) Unpaced() bool { return t.Gen == 0 && !t.Slot }

// Wait returns when the next attempt of key may go, in h, at the latest
// by ctx's deadline: at once while the key is idle; once it holds a slot
// while in slow start; at its turn once engaged. A turn made void while
// the attempt waits is given up for a new one. A wait that would end past
// the deadline is not begun and takes no turn: Wait returns a *TooLate.
// It closes h when it returns an error.
func Wait(ctx context.Context, h Handle) (Turn, error) {
	for {
		if h.Unpaced() {
			return Turn{H: h}, nil
		}
		dl, _ := ctx.Deadline()
		fx, err := h.Step(ctx, Event{Kind: Reserve, Deadline: dl})
		if err != nil {
			h.Close()
			return Turn{}, err
		}
		g := fx.Grant
		switch {
		case g.Go:
			h.Sent()
			return Turn{H: h, Slot: g.Slot}, nil
		case g.TooLate:
			h.Close()
			return Turn{}, &TooLate{Wait: g.Wait}
		}
		void, err := h.Await(ctx, g)
		switch {
		case err != nil:
			if g.Paced {
				Abandon(Turn{H: h, Gen: g.Gen, At: g.At, Next: g.Next})
			} else {
				h.Close()
			}
			return Turn{}, err
		case void || g.WaitSlot:
			continue
		}
		h.Sent()
		return Turn{H: h, Gen: g.Gen, At: g.At, Next: g.Next}, nil
	}
}

// Done tells t's key the outcome of the attempt sent on t, and closes
// it. A success of a calm key that publishes no quota is only counted; an
// outcome that says nothing of the rate changes nothing (but gives back a
// slot).
func Done(t Turn, sig Signal) {
	defer t.H.Close()
	switch {
	case sig.Accepted && !t.Slot && !sig.Hinted && sig.Quota.Reset.IsZero() && t.H.Calm():
		return
	case !sig.Accepted && !sig.Refused && !t.Slot:
		return
	}
	t.H.Step(context.Background(), Event{Kind: Answer, Accepted: sig.Accepted, Refused: sig.Refused,
		Hinted: sig.Hinted, Wait: sig.Wait, Quota: sig.Quota, Gen: t.Gen, Slot: t.Slot})
}

// Abandon gives t back, its attempt not sent, and closes it.
func Abandon(t Turn) {
	defer t.H.Close()
	switch {
	case t.Slot:
		t.H.Step(context.Background(), Event{Kind: Release})
	case t.Gen != 0:
		t.H.Step(context.Background(), Event{Kind: Cancel, At: t.At, Next: t.Next})
	}
}
