package pacecore

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Validate reports invalid settings; prefix names the type.
func (c Config) Validate(prefix string) error {
	switch {
	case c.MinRate < 0 || math.IsNaN(c.MinRate) || math.IsInf(c.MinRate, 0):
		return fmt.Errorf("%s.MinRate %v is not a finite positive rate", prefix, c.MinRate)
	case c.Adapt > AIMD:
		return fmt.Errorf("%s.Adapt %d is not a known algorithm", prefix, c.Adapt)
	}
	return nil
}

// Defaulted returns c with its zero settings given their defaults.
func (c Config) Defaulted() Config {
	if c.MinRate <= 0 {
		c.MinRate = DefaultMinRate
	}
	return c
}

// Signal is what an outcome tells a Pacer: accepted, refused for its
// rate, or neither; a refusal's server wait, when Hinted; its quota.
type Signal struct {
	Accepted, Refused bool
	Hinted            bool
	Wait              time.Duration
	Quota             Quota
}

// Store keeps the keys' states (in memory, or in Redis for a fleet); Open
// returns a key's handle for one attempt, which Close ends.
type Store interface {
	Open(key string) Handle
}

// Handle is one key of a Store, open for one attempt.
type Handle interface {
	// Unpaced and Calm count an attempt sent, or a success, without a
	// step when they can tell it needs none (State.Unpaced, State.Calm).
	Unpaced() bool
	Calm() bool
	// Step applies ev at the store's time (ev.Deadline: the process's).
	Step(ctx context.Context, ev Event) (Effects, error)
	// Sent counts an attempt that goes on a grant.
	Sent()
	// Await waits for g's turn (Paced; true early if the turns are void),
	// or for Wake or g.Until (WaitSlot); ctx's error if ctx ends first.
	Await(ctx context.Context, g Grant) (void bool, err error)
	// Close ends the attempt's use of the key.
	Close()
}

// TooLate is the error of a wait that would end past the deadline, Wait
// from the call.
type TooLate struct{ Wait time.Duration }

func (e *TooLate) Error() string {
	return fmt.Sprintf("pacing wait of %v would end past the context's deadline", e.Wait)
}

// Turn is a turn Wait handed out, for Done or Abandon.
type Turn struct {
	H        Handle
	Gen      uint64 // the generation of the rate it was paced at; 0: not paced
	Slot     bool   // it holds a slot of slow start
	At, Next time.Time
}

// Unpaced reports whether the turn went with no slot and no generation.
func (t *Turn) Unpaced() bool { return t.Gen == 0 && !t.Slot }

// Wait returns when the next attempt of h's key may go: at once while
// idle, with a slot in slow start, at its turn once engaged (a turn made
// void meanwhile is given up for a new one). A wait past ctx's deadline
// is not begun and takes no turn: a *TooLate. It closes h on an error.
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

// Done tells t's key the outcome of its attempt, and closes it. A calm
// key's success that publishes no quota is only counted; an outcome that
// says nothing of the rate only gives back a slot.
func Done(t Turn, sig Signal) {
	defer t.H.Close()
	switch {
	case sig.Accepted && !t.Slot && sig.Quota.Reset.IsZero() && t.H.Calm():
		return
	case !sig.Accepted && !sig.Refused && !t.Slot:
		return
	}
	t.H.Step(context.Background(), Event{Kind: Answer, Accepted: sig.Accepted, Refused: sig.Refused,
		Hinted: sig.Hinted, Wait: sig.Wait, Quota: sig.Quota, Gen: t.Gen, Slot: t.Slot})
}

// Outcome returns an answer's Signal; a success's wait is its Quota's.
func Outcome(accepted, refused, hinted bool, wait time.Duration, q Quota) Signal {
	switch {
	case accepted:
		return Signal{Accepted: true, Quota: q}
	case refused:
		return Signal{Refused: true, Hinted: hinted, Wait: wait, Quota: q}
	}
	return Signal{}
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
