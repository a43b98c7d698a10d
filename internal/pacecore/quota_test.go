package pacecore

import (
	"testing"
	"time"
)

// The quota's states, step by step: a reading that the client's pace
// would overrun spreads the turns over the time left; a spent quota
// waits for its reset, refusing a wait past the deadline; past the reset
// one attempt reads the new quota while the others wait for its answer.
func TestQuotaStates(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	t0 := time.Unix(1_000, 0)
	reset := t0.Add(10 * time.Second)
	send := func(at time.Time) Grant {
		t.Helper()
		g := st.Step(at, Event{Kind: Reserve}).Grant
		if g.Go || g.Paced {
			st.Step(at, Event{Kind: Answer, Sent: 1, Accepted: true})
		}
		return g
	}
	answer := func(at time.Time, remaining int64, until time.Time) Effects {
		return st.Step(at, Event{Kind: Answer, Accepted: true, Quota: Quota{Remaining: remaining, Reset: until}})
	}

	// Loose: a quota far above the pace changes nothing.
	if g := send(t0); !g.Go {
		t.Fatalf("first attempt: %+v; want it to go", g)
	}
	answer(t0, 1_000, reset)
	if !st.Unpaced(t0) {
		t.Fatal("a quota of 1,000 for 10 s binds one attempt")
	}

	// Spreading: 10 attempts at once, answered, against 9 left.
	for range 9 {
		st.Step(t0, Event{Kind: Answer, Sent: 1, Accepted: true})
	}
	st.Step(t0, Event{Kind: Answer, Sent: 1, Accepted: true, Quota: Quota{Remaining: 9, Reset: reset}})
	if st.Unpaced(t0) {
		t.Fatal("10 sent at once against 9 left for 10 s: still unpaced")
	}
	g := st.Step(t0, Event{Kind: Reserve}).Grant
	if !g.Paced {
		t.Fatalf("spreading: %+v; want a paced turn", g)
	}

	// Spent: wait for the reset, or refuse a deadline before it.
	answer(t0.Add(time.Second), 0, reset)
	at := t0.Add(2 * time.Second)
	if g := st.Step(at, Event{Kind: Reserve}).Grant; !g.WaitSlot || !g.Until.Equal(reset) {
		t.Fatalf("spent: %+v; want a wait until the reset", g)
	}
	if g := st.Step(at, Event{Kind: Reserve, Deadline: reset.Add(-time.Millisecond)}).Grant; !g.TooLate || g.Wait != 8*time.Second {
		t.Fatalf("spent, the deadline before the reset: %+v; want TooLate, 8 s", g)
	}

	// Probing: past the reset one goes, the others wait for its answer,
	// which wakes them with the new quota.
	if g := st.Step(reset, Event{Kind: Reserve}).Grant; !g.Go {
		t.Fatalf("at the reset: %+v; want the probe to go", g)
	}
	if g := st.Step(reset, Event{Kind: Reserve}).Grant; !g.WaitSlot || !g.Until.Equal(reset.Add(BucketWidth)) {
		t.Fatalf("beside the probe: %+v; want a wait for its answer", g)
	}
	fx := st.Step(reset.Add(time.Millisecond), Event{Kind: Answer, Sent: 1, Accepted: true, Quota: Quota{Remaining: 9, Reset: reset.Add(10 * time.Second)}})
	if !fx.Wake {
		t.Fatalf("the probe's answer: %+v; want the waiters woken", fx)
	}
	if g := st.Step(reset.Add(time.Millisecond), Event{Kind: Reserve}).Grant; !g.Paced {
		t.Fatalf("after the probe: %+v; want the new quota spread", g)
	}
}

// A server that publishes a spent quota and goes on serving is not
// believed after minSamples successes past it (the first to say 0 is
// its last request), until it refuses.
func TestQuotaDisbelief(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	t0 := time.Unix(1_000, 0)
	reset := t0.Add(time.Hour)
	for i := range minSamples {
		st.Step(t0, Event{Kind: Answer, Sent: 1, Accepted: true, Quota: Quota{Remaining: 0, Reset: reset}})
		if spent := !st.Unpaced(t0); !spent {
			t.Fatalf("success %d past a published 0: not held", i+1)
		}
	}
	st.Step(t0, Event{Kind: Answer, Sent: 1, Accepted: true, Quota: Quota{Remaining: 0, Reset: reset}})
	if !st.Unpaced(t0) {
		t.Fatalf("after %d successes past a published 0, the quota still holds the key", minSamples)
	}
	st.Step(t0, Event{Kind: Answer, Sent: 1, Refused: true, Quota: Quota{Remaining: 0, Reset: reset}})
	if st.Unpaced(t0) {
		t.Fatal("a refusal with the quota spent: the key is not held")
	}
}

// Refusals under a published quota are the quota's: a cold burst over it
// holds the key until the reset, and teaches the rate nothing (the key is
// not engaged, its rate not cut); without the quota, the same refusals
// engage it.
func TestQuotaRefusalsAreNoRate(t *testing.T) {
	for _, published := range []bool{true, false} {
		cfg := Config{MinRate: DefaultMinRate}
		st := New(&cfg)
		t0 := time.Unix(1_000, 0)
		reset := t0.Add(5 * time.Second)
		at := t0
		for i := range 64 {
			ev := Event{Kind: Answer, Sent: 1, Accepted: i < 50, Refused: i >= 50}
			if published {
				ev.Quota = Quota{Remaining: int64(max(49-i, 0)), Reset: reset}
			}
			st.Step(at, ev)
			at = at.Add(10 * time.Millisecond)
		}
		st.Step(at.Add(BucketWidth), Event{Kind: Reserve}) // the meter weighs the buckets
		if published && (st.Engaged() || st.Unpaced(at)) {
			t.Errorf("with the quota published: engaged %v, unpaced %v; want held by the quota alone", st.Engaged(), st.Unpaced(at))
		}
		if !published && !st.Engaged() {
			t.Error("14 refusals in a row without a quota: not engaged")
		}
	}
}

// Whole-second resets are rounded, each answer's anew: within one window
// the key waits for the earliest reading's reset, not the latest's (up to
// a second late in every window), and a new window's reading is taken.
func TestQuotaEarliestReset(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	t0 := time.Unix(1_000, 0)
	truth := t0.Add(9600 * time.Millisecond) // the server's reset
	ceil := func(at time.Time) time.Time {   // the reading an answer at at gives
		return at.Add((truth.Sub(at) + time.Second - 1) / time.Second * time.Second)
	}
	for i, r := range []struct {
		after     time.Duration
		remaining int64
	}{{0, 3}, {700 * time.Millisecond, 2}, {1500 * time.Millisecond, 1}, {2 * time.Second, 0}} {
		at := t0.Add(r.after)
		st.Step(at, Event{Kind: Reserve})
		st.Step(at, Event{Kind: Answer, Sent: 1, Accepted: true, Quota: Quota{Remaining: r.remaining, Reset: ceil(at)}})
		if i == 1 && !ceil(at).Before(ceil(t0)) {
			t.Fatal("the readings do not differ: the test proves nothing")
		}
	}
	earliest := t0.Add(9700 * time.Millisecond) // the answer at 0.7 s: 8.9 s rounded up
	at := t0.Add(3 * time.Second)
	if g := st.Step(at, Event{Kind: Reserve}).Grant; !g.WaitSlot || !g.Until.Equal(earliest) {
		t.Fatalf("spent: %+v; want a wait until %v, the earliest reading's reset", g, earliest.Sub(t0))
	}
	// Past it, the probe's reading of the next window is taken.
	st.Step(earliest, Event{Kind: Reserve})
	next := truth.Add(10 * time.Second)
	st.Step(earliest, Event{Kind: Answer, Sent: 1, Accepted: true, Quota: Quota{Remaining: 0, Reset: next}})
	if g := st.Step(earliest, Event{Kind: Reserve}).Grant; !g.WaitSlot || !g.Until.Equal(next) {
		t.Fatalf("the next window: %+v; want a wait until its reset", g)
	}
}

// Turns handed out at a nearly spent quota's slow pace are void once a
// reading of a new window comes (else the attempts holding them would
// wait out the old pace, seconds apart, through the new window), and not
// for a reading out of order.
func TestQuotaNewWindowVoidsTurns(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	t0 := time.Unix(1_000, 0)
	for range 10 {
		st.Step(t0, Event{Kind: Reserve})
	}
	st.Step(t0, Event{Kind: Answer, Sent: 10, OK: 9, Accepted: true, Quota: Quota{Remaining: 2, Reset: t0.Add(5 * time.Second)}})
	var last Grant
	for range 5 {
		last = st.Step(t0, Event{Kind: Reserve}).Grant
	}
	if !last.Paced || last.At.Before(t0.Add(5*time.Second)) {
		t.Fatalf("the fifth turn against 2 left: %+v; want it paced past the reset", last)
	}
	// An answer out of order (one more left, with one in flight) is no
	// new window: the turns stand.
	if fx := st.Step(t0, Event{Kind: Answer, Sent: 2, Accepted: true, Quota: Quota{Remaining: 3, Reset: t0.Add(5 * time.Second)}}); fx.Void {
		t.Fatalf("a reading out of order: %+v; want the turns kept", fx)
	}
	at := t0.Add(time.Second)
	fx := st.Step(at, Event{Kind: Answer, Accepted: true, Quota: Quota{Remaining: 40, Reset: at.Add(5 * time.Second)}})
	if !fx.Void {
		t.Fatalf("a new window's reading: %+v; want the old turns void", fx)
	}
	if g := st.Step(at, Event{Kind: Reserve}).Grant; !g.Paced || g.At.After(at.Add(time.Second)) {
		t.Fatalf("after the new window's reading: %+v; want a turn at its pace", g)
	}
}
