package redispace

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
)

// Wait returns when the next attempt of req may be sent: while req's key
// is in slow start, once it holds a slot of the window; once the key has
// engaged, at its turn in the fleet's schedule. A turn made void while
// the attempt waits for it (the rate was cut, the key paused or
// restarted) is given up for a new one, as the attempt finds at the looks
// it takes halfway through a long wait and just before the turn. A wait
// that would end past ctx's deadline is not begun and takes no turn;
// except while the key holds its rate through an outage (refused from its
// first attempt on, or for as long as an outage), or before its first
// success, when the wait is a probe's, no forecast: the attempt asks
// again, about every 75 ms and with no turn, until a success ends it (a
// success after an outage restarts the key) or ctx ends.
// It implements [retry.Pacer].
func (p *Pacer) Wait(ctx context.Context, req *http.Request) (retry.Turn, error) {
	if p.usingFallback() {
		return p.fallbackPacer().Wait(ctx, req)
	}
	key := p.prefix() + p.key(req)
	waiting := false // counted among slow start's waiters
	var wait time.Duration
	for polls := 0; ; polls++ {
		if wait > 0 {
			if err := p.doSleep(ctx, wait); err != nil {
				if waiting {
					p.woke(key)
				}
				return nil, err
			}
			what := "hold"
			if waiting {
				what = "slot"
			}
			if ready, err := p.ready(ctx, key, what); err == nil && !ready {
				continue // nothing changed for it: wait on
			}
		}
		fx, went, err := p.take(ctx, key, waiting, true)
		if err != nil {
			// A wait for a slot left counted ends with slow start's
			// time limit.
			return p.turnToFallback(ctx, req, err)
		}
		waiting = fx.WaitSlot
		switch {
		case went:
			return &turn{p: p, key: key}, nil
		case fx.Slot:
			return &turn{p: p, key: key, slot: true}, nil
		case fx.Refused:
			return nil, &retry.TurnTooLate{Wait: fx.Turn}
		case fx.WaitSlot:
			// Slow start's window is full: look again shortly, the
			// waiters of the fleet spread over the interval.
			wait = pollInterval(polls)
		case fx.Held:
			// Past the deadline at a rate held through an outage, or
			// guessed from refusals before any success, which is a
			// probe's, no forecast (see pacecore's reserve). Ask again
			// until a success ends it, or until ctx ends.
			wait = spread(heldPoll)
		default:
			t, err := p.await(ctx, key, fx.Grant)
			if err == errVoid {
				wait = 0
				continue
			}
			return t, err
		}
	}
}

// take asks key's state for an attempt's turn: went when it goes now,
// unpaced; else the effects of its step (see next). A waiter for a slot
// of slow start (waiting) looks again. With count, an attempt that goes
// now is counted as sent (Wait's); without, its caller counts it.
func (p *Pacer) take(ctx context.Context, key string, waiting, count bool) (pacecore.Effects, bool, error) {
	op := opSend
	if waiting || !count {
		op = opRead // a waiter's wait ends first, in a step
	}
	snap, went, err := p.load(ctx, key, op)
	if err != nil || went {
		return pacecore.Effects{}, went, err
	}
	dl, hasDL := ctx.Deadline()
	var sends int64
	fx, read, err := p.update(key, &snap, func(st *pacecore.State, now time.Time, n, ok int64) (pacecore.Effects, int64) {
		var deadline time.Time
		if hasDL {
			deadline = now.Add(p.until(dl)) // on the fleet's clock
		}
		var fx pacecore.Effects
		fx, sends = next(st, now, pacecore.Event{Sent: n, OK: ok}, waiting, deadline)
		if !count {
			return fx, 0
		}
		return fx, sends
	}, func(fx pacecore.Effects) { p.giveBack(key, fx) })
	if fx.Paced {
		// The wait is to the turn's time on the process's clock (see
		// fleetClock), not from the reply: the round's write and its wait
		// for other steps come out of it.
		if at, ok := p.fleet.local(fx.At); ok && p.redisNow == nil && p.now == nil {
			fx.Turn = max(time.Until(at), 0)
		} else {
			fx.Turn = max(fx.Turn-time.Since(read), 0)
		}
	}
	return fx, err == nil && sends > 0 && !fx.Slot, err
}

// next steps st for an attempt that asks for a turn at now, carrying the
// counts of carry into the first event: a waiter for a slot wakes
// (Woke), a key in slow start gives a slot or a wait for one (Admit), an
// engaged key a turn (Reserve), by deadline. It returns the effects, and
// 1 when the attempt goes now (a slot, or an idle key), counted as sent.
func next(st *pacecore.State, now time.Time, carry pacecore.Event, waiting bool, deadline time.Time) (pacecore.Effects, int64) {
	if waiting {
		carry.Kind = pacecore.Woke
		st.Step(now, carry)
		carry = pacecore.Event{}
	}
	if st.Mode() == pacecore.ModeSlowStart {
		carry.Kind = pacecore.Admit
		fx := st.Step(now, carry)
		if fx.Slot {
			return fx, 1
		}
		return fx, 0
	}
	carry.Kind, carry.Deadline = pacecore.Reserve, deadline
	fx := st.Step(now, carry)
	if fx.Paced || fx.Refused || fx.Held {
		return fx, 0
	}
	return fx, 1 // not engaged: it goes now
}

// errVoid tells Wait that the turn it waited for was made void: it takes
// a new one.
var errVoid = errors.New("redispace: the turn was made void")

// await sleeps until the turn g comes, and counts the attempt as sent.
// A turn made void meanwhile (a cut, a pause, a restart) is given up
// (errVoid): a long wait looks at it halfway, repeatedly, and every wait
// once more goAhead before its end, where the attempt is counted as sent;
// then it sleeps to the turn's time. Sent at a void turn, the attempt
// would come among those of the new schedule, which a limiter without a
// burst refuses; looked at as it goes, it went a round trip late, by a
// few milliseconds more or less each time, and such a limiter refused
// turns spaced above its interval, teaching the fleet a lower rate.
func (p *Pacer) await(ctx context.Context, key string, g pacecore.Grant) (retry.Turn, error) {
	// Every sleep is to the turn's time, due: the looks at the turn take
	// round trips, which counted sleeps would add to the wait.
	due := p.clock().Add(g.Turn)
	for d := g.Turn; d > recheckAbove; d = due.Sub(p.clock()) {
		if err := p.doSleep(ctx, d/2); err != nil {
			p.cancel(key, g)
			return nil, err
		}
		valid, err := p.turnValid(ctx, key, g.Gen, false)
		if err == nil && !valid {
			return nil, errVoid
		}
		// Redis failed meanwhile: keep to the wait as it stood.
	}
	if s := due.Sub(p.clock()) - goAhead; s > 0 {
		if err := p.doSleep(ctx, s); err != nil {
			p.cancel(key, g)
			return nil, err
		}
	}
	valid, err := p.turnValid(ctx, key, g.Gen, true)
	switch {
	case err != nil:
		p.trip(err) // the attempt goes all the same, uncounted
	case !valid:
		return nil, errVoid
	}
	if d := due.Sub(p.clock()); d > 0 {
		if err := p.doSleep(ctx, d); err != nil {
			return nil, err // counted, but not sent: a count too many
		}
	}
	return &turn{p: p, key: key, gen: g.Gen}, nil
}

// cancel gives the turn g of key back, best effort: its attempt will not
// be sent.
func (p *Pacer) cancel(key string, g pacecore.Grant) {
	p.stepAlone(key, pacecore.Event{Kind: pacecore.Cancel, At: g.At, Next: g.Next})
}

// woke ends an attempt's wait for a slot of slow start, best effort: it
// will not ask again.
func (p *Pacer) woke(key string) {
	p.stepAlone(key, pacecore.Event{Kind: pacecore.Woke})
}

// giveBack undoes what a step of take that outlived Timeout handed out:
// its attempt went on with Fallback meanwhile.
func (p *Pacer) giveBack(key string, fx pacecore.Effects) {
	switch {
	case fx.Slot:
		p.stepAlone(key, pacecore.Event{Kind: pacecore.Release})
	case fx.WaitSlot:
		p.woke(key)
	case fx.Paced:
		p.cancel(key, fx.Grant)
	}
}

// stepAlone steps key's state with ev, on a context of its own; a
// failure is reported (see trip).
func (p *Pacer) stepAlone(key string, ev pacecore.Event) {
	_, _, err := p.update(key, nil, func(st *pacecore.State, now time.Time, n, ok int64) (pacecore.Effects, int64) {
		ev.Sent, ev.OK = n, ok
		return st.Step(now, ev), 0
	}, nil)
	if err != nil {
		p.trip(err)
	}
}

// pollInterval is how long an attempt waits for a slot of slow start
// before it asks again, the polls-th time: from slotPoll, doubling up to
// slotPollMax, spread.
func pollInterval(polls int) time.Duration {
	return spread(min(slotPoll<<min(polls, 8), slotPollMax))
}

// spread draws a wait at random from half to all of d, so that the
// fleet's waiters do not ask Redis together.
func spread(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
