package pacecore

import (
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/pacesim"
)

var epoch = pacesim.Epoch

// engaged returns a key engaged at now: an accepted answer, then
// refusals, each an answer of an attempt sent unpaced.
func engaged(t *testing.T, cfg Config) (*State, time.Time) {
	t.Helper()
	if cfg.MinRate == 0 {
		cfg.MinRate = DefaultMinRate
	}
	st := New(&cfg)
	at := epoch
	st.Step(at, Event{Kind: Answer, Accepted: true, Sent: 1})
	for range 6 {
		at = at.Add(time.Millisecond)
		st.Step(at, Event{Kind: Answer, Refused: true, Sent: 1})
	}
	if !st.Engaged() {
		t.Fatalf("not engaged after an accepted answer and six refusals (mode %v)", st.Mode())
	}
	return &st, at
}

// An idle key hands out no turns: its attempts go at once.
func TestIdleGoes(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	fx := st.Step(epoch, Event{Kind: Reserve})
	if !fx.Go || fx.Paced {
		t.Fatalf("Reserve on a new key: %+v; want Go", fx.Grant)
	}
	if !st.Unpaced(epoch) {
		t.Error("a new key is not unpaced")
	}
}

// An engaged key hands out turns one interval apart; one past the
// deadline takes nothing; a turn given back is handed out again.
func TestTurns(t *testing.T) {
	st, at := engaged(t, Config{})
	rate := st.Rate(at)
	first := st.Step(at, Event{Kind: Reserve})
	second := st.Step(at, Event{Kind: Reserve})
	if !first.Paced || !second.Paced {
		t.Fatalf("Reserve on an engaged key: %+v, %+v; want turns", first.Grant, second.Grant)
	}
	gap := second.At.Sub(first.At)
	if want := time.Duration(float64(time.Second) / rate); gap < want-time.Microsecond || gap > want+time.Microsecond {
		t.Errorf("turns %v apart at %v/s; want %v", gap, rate, want)
	}
	late := st.Step(at, Event{Kind: Reserve, Deadline: second.At})
	if !late.TooLate || late.Wait <= second.Wait {
		t.Fatalf("a turn past the deadline: %+v; want TooLate", late.Grant)
	}
	st.Step(at, Event{Kind: Cancel, At: second.At, Next: second.Next})
	again := st.Step(at, Event{Kind: Reserve})
	if !again.At.Equal(second.At) {
		t.Errorf("after the last turn was given back, the next is at %v; want %v again", again.At, second.At)
	}
}

// A refusal of an engaged key's rate with a server's wait pauses the key
// until then, and voids the turns handed out.
func TestServerPause(t *testing.T) {
	st, at := engaged(t, Config{})
	turn := st.Step(at, Event{Kind: Reserve})
	fx := st.Step(at, Event{Kind: Answer, Refused: true, Gen: turn.Gen, Hinted: true, Wait: 3 * time.Second})
	if !fx.Void || !st.Stale(turn.Gen) {
		t.Error("a pause did not void the turns handed out")
	}
	next := st.Step(at, Event{Kind: Reserve})
	if next.At.Before(at.Add(3 * time.Second)) {
		t.Errorf("a turn at %v, within the server's pause", next.At.Sub(at))
	}
}

// A server's wait on a refusal that is no limit's (an idle key's, short
// of the evidence) holds no other attempt; a success publishing a spent
// quota holds them all until its reset.
func TestIdleHintHoldsNoOther(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	at := epoch
	st.Step(at, Event{Kind: Answer, Accepted: true, Sent: 1})
	st.Step(at, Event{Kind: Answer, Refused: true, Sent: 1, Hinted: true, Wait: time.Minute})
	if g := st.Step(at, Event{Kind: Reserve}); !g.Go || st.Engaged() {
		t.Errorf("after one refusal with a wait: %+v, engaged %v; want the next attempt to go at once", g.Grant, st.Engaged())
	}
	st.Step(at, Event{Kind: Answer, Accepted: true, Sent: 1, Quota: Quota{Remaining: 0, Reset: at.Add(time.Minute)}})
	if g := st.Step(at, Event{Kind: Reserve}); !g.WaitSlot || g.Until.Before(at.Add(time.Minute)) {
		t.Errorf("after a success saying the quota is spent: %+v; want a wait a minute on", g.Grant)
	}
}

// The rate never falls below MinRate, however many refusals.
func TestMinRate(t *testing.T) {
	st, at := engaged(t, Config{MinRate: 2})
	for range 100 {
		turn := st.Step(at, Event{Kind: Reserve})
		at = turn.At
		st.Step(at, Event{Kind: Answer, Refused: true, Gen: turn.Gen})
		if st.Engaged() && st.Rate(at) < 2 {
			t.Fatalf("rate %v below MinRate 2", st.Rate(at))
		}
	}
}

// Slow start: a new key has the window's slots of attempts unanswered;
// the next waits, until an answer frees a slot; and the window opens one
// slot per success. An answer that no attempt waited for ends it.
func TestSlowStart(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate, InitialWindow: 2}
	st := New(&cfg)
	for i := range 2 {
		if fx := st.Step(epoch, Event{Kind: Reserve}); !fx.Slot {
			t.Fatalf("attempt %d: %+v; want a slot", i+1, fx.Grant)
		}
	}
	fx := st.Step(epoch, Event{Kind: Reserve})
	if !fx.WaitSlot || !fx.Until.Equal(epoch.Add(SlowStartLimit)) {
		t.Fatalf("a third attempt: %+v; want to wait for a slot, until %v", fx.Grant, SlowStartLimit)
	}
	at := epoch.Add(time.Millisecond)
	if fx := st.Step(at, Event{Kind: Answer, Accepted: true, Slot: true}); !fx.Wake {
		t.Error("an answer did not wake the waiter")
	}
	for i := range 2 { // one slot freed, one opened
		if fx := st.Step(at, Event{Kind: Reserve}); !fx.Slot {
			t.Fatalf("after a success, attempt %d: %+v; want a slot", i+1, fx.Grant)
		}
	}
	for range 3 {
		st.Step(at, Event{Kind: Answer, Accepted: true, Slot: true})
	}
	if st.Mode() != Idle {
		t.Errorf("mode %v after answers no attempt waited for; want idle", st.Mode())
	}
	late := New(&cfg)
	late.Step(epoch, Event{Kind: Reserve})
	if fx := late.Step(epoch.Add(SlowStartLimit), Event{Kind: Reserve}); !fx.Go || fx.Slot {
		t.Errorf("after SlowStartLimit: %+v; want slow start over", fx.Grant)
	}
}
