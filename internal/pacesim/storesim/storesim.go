// Package storesim drives a key of a pacecore.Store through the
// simulator of package pacesim, as pacecore's Wait, Done and Abandon
// drive it, unrolled onto the simulator's one goroutine and fake clock:
// package pace's tests run the golden scenarios through the memory store,
// package redispace's through Redis, against the same traces.
package storesim

import (
	"context"
	"time"

	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/internal/pacesim"
)

// Key is one key of Store, on the clock that Set moves: each event sets
// it to the event's time first. The store's Await must sleep on a clock
// that does not move (the simulator moves it), returning at once.
type Key struct {
	Store pacecore.Store
	Name  string
	Set   func(time.Time)
	// Read, if not nil, reads what a trace records of the key.
	Read func() pacesim.State

	last pacesim.State
}

// turn is a turn Reserve handed out.
type turn struct {
	k *Key
	t pacecore.Turn
	g pacecore.Grant
}

func (t *turn) Gen() uint64 { return t.t.Gen }

// Stale reports whether the turn is void, as Wait finds when the wait
// for it ends; a turn still good is counted as sent then.
func (t *turn) Stale() bool {
	defer t.t.H.Close() // the answer opens the key again
	void, _ := t.t.H.Await(context.Background(), pacecore.Grant{Paced: true, Gen: t.g.Gen})
	if !void {
		t.t.H.Sent()
	}
	return void
}

// Reserve implements pacesim.Key.
func (k *Key) Reserve(at time.Time) (time.Duration, pacesim.Turn) {
	k.Set(at)
	h := k.Store.Open(k.Name)
	if h.Unpaced() {
		h.Close()
		return 0, nil
	}
	fx, err := h.Step(context.Background(), pacecore.Event{Kind: pacecore.Reserve})
	if err != nil || !fx.Paced {
		if err == nil && fx.Go {
			h.Sent()
		}
		h.Close()
		return 0, nil
	}
	return fx.Wait, &turn{k: k, t: pacecore.Turn{H: h, Gen: fx.Gen, At: fx.At, Next: fx.Next}, g: fx.Grant}
}

// Send implements pacesim.Key: Reserve and Stale count the attempts.
func (k *Key) Send() {}

// Answer implements pacesim.Key.
func (k *Key) Answer(r pacesim.Reply, gen uint64, at time.Time) {
	k.Set(at)
	pacecore.Done(pacecore.Turn{H: k.Store.Open(k.Name), Gen: gen}, pacecore.Signal{Accepted: !r.Refused, Refused: r.Refused, Hinted: r.Hint > 0, Wait: r.Hint})
	if k.Read != nil {
		k.last = k.Read()
	}
}

// State implements pacesim.Key: the state the last answer left.
func (k *Key) State() pacesim.State { return k.last }
