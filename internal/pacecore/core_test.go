package pacecore

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/backoff-jitter/retry"
)

// These tests drive a key's state through its seam, step, as package pace's
// entry does, with the time given: no lock, no clock, no goroutine.

func throttle(gen uint64) Event {
	return Event{Kind: Answer, Class: retry.Throttled, Answered: true, ForRate: true, Gen: gen}
}

func success(gen uint64) Event {
	return Event{Kind: Answer, Class: retry.Success, Answered: true, OK: 1, Gen: gen}
}

func TestCoreSlowStart(t *testing.T) {
	s := New(&Config{MinRate: DefaultMinRate, InitialWindow: 2})
	require.Equal(t, ModeSlowStart, s.mode)
	fx := s.Step(pacerEpoch, Event{Kind: Admit})
	assert.True(t, fx.Slot)
	assert.True(t, fx.ArmLimit, "the first attempt begins the time limit")
	assert.Zero(t, fx.Round)
	fx = s.Step(pacerEpoch, Event{Kind: Admit})
	assert.True(t, fx.Slot)
	assert.False(t, fx.ArmLimit, "armed once")
	fx = s.Step(pacerEpoch, Event{Kind: Admit})
	assert.False(t, fx.Slot)
	assert.True(t, fx.WaitSlot, "the window is full")

	// An answer opens one slot more, and wakes the waiter.
	ok := success(0)
	ok.Slot = true
	fx = s.Step(pacerEpoch, ok)
	assert.True(t, fx.Wake)
	assert.Equal(t, ModeSlowStart, s.mode, "an attempt waits: slow start goes on")
	s.Step(pacerEpoch, Event{Kind: Woke})
	fx = s.Step(pacerEpoch, Event{Kind: Admit})
	assert.True(t, fx.Slot)
	assert.Equal(t, 3, s.start.slots)

	// A transport error gives its slot back and opens none.
	fx = s.Step(pacerEpoch, Event{Kind: Answer, Class: retry.Transient, Slot: true})
	assert.True(t, fx.Wake)
	assert.Equal(t, 3, s.start.slots)

	// The time limit of another slow start ends nothing; its own ends it.
	fx = s.Step(pacerEpoch, Event{Kind: TimeLimit, Round: 1})
	assert.Equal(t, ModeSlowStart, s.mode)
	assert.False(t, fx.StopLimit)
	fx = s.Step(pacerEpoch, Event{Kind: TimeLimit, Round: 0})
	assert.Equal(t, ModeIdle, s.mode)
	assert.True(t, fx.StopLimit)
	assert.True(t, fx.Wake, "the waiters go on")
	fx = s.Step(pacerEpoch, Event{Kind: Admit})
	assert.False(t, fx.Slot || fx.WaitSlot, "out of slow start, no slot")
}

func TestCoreEngagesAndHandsOutTurns(t *testing.T) {
	s := New(&Config{MinRate: DefaultMinRate, InitialWindow: -1})
	require.Equal(t, ModeIdle, s.mode)
	now := pacerEpoch
	fx := s.Step(now, Event{Kind: Reserve, Sent: 10})
	assert.False(t, fx.Paced, "idle: no turn")
	for i := range coldRefusalsToEngage {
		now = now.Add(time.Millisecond)
		require.False(t, s.Engaged(), "engaged after %d refusals", i)
		fx = s.Step(now, throttle(0))
	}
	require.Equal(t, ModePaced, s.mode, "three refusals in a row among a new key's first answers")
	assert.True(t, fx.Void, "engaging voids the turns")
	interval := s.sched.interval
	require.Positive(t, interval)

	first := s.Step(now, Event{Kind: Reserve}).Grant
	require.True(t, first.Paced)
	assert.Equal(t, interval, first.Turn, "one interval after the cut")
	assert.Equal(t, s.sched.gen, first.Gen)
	second := s.Step(now, Event{Kind: Reserve}).Grant
	assert.Equal(t, 2*interval, second.Turn)

	// Given back while it is the last, a turn is handed out again.
	s.Step(now, Event{Kind: Cancel, At: second.At, Next: second.Next})
	again := s.Step(now, Event{Kind: Reserve}).Grant
	assert.Equal(t, second.At, again.At)

	// Past the deadline, nothing ever accepted: the rate is a guess from
	// refusals, and the attempt waits for a success (held), taking no
	// turn.
	late := s.Step(now, Event{Kind: Reserve, Deadline: now.Add(interval)}).Grant
	assert.True(t, late.Held)
	assert.False(t, late.Paced || late.Refused)
	assert.Equal(t, 3*interval, late.Turn, "the wait it would have had")
	// A success counted (carried in by any event), the wait is the
	// limit's: refused, and no turn taken.
	s.Step(now, Event{Kind: Cancel, OK: 1})
	late = s.Step(now, Event{Kind: Reserve, Deadline: now.Add(interval)}).Grant
	assert.True(t, late.Refused)
	assert.False(t, late.Paced || late.Held)
	assert.Equal(t, 3*interval, late.Turn, "the wait it would have had")
	assert.Equal(t, 3*interval, s.Step(now, Event{Kind: Reserve}).Turn)

	// A throttle of a turn paced before the cut cuts nothing more.
	fill := s.rate.fill
	s.Step(now, throttle(first.Gen-1))
	assert.Equal(t, fill, s.rate.fill)
	// One paced at the rate in force cuts, and voids the turns.
	fx = s.Step(now.Add(time.Millisecond), throttle(first.Gen))
	assert.Less(t, s.rate.fill, fill)
	assert.True(t, fx.Void)
	assert.True(t, s.Stale(first.Gen))
}

// A key refused from its first attempt on holds its rate, and a wait past
// the deadline waits for the hold to end, which the first success ends.
func TestCoreHoldsThroughAnOutage(t *testing.T) {
	s := New(&Config{MinRate: DefaultMinRate, InitialWindow: -1})
	now := pacerEpoch
	s.Step(now, Event{Kind: Reserve, Sent: 20})
	for i := 0; s.mode != ModeHeld; i++ {
		require.Less(t, i, 200, "never held")
		g := s.Step(now, Event{Kind: Reserve}).Grant
		now = now.Add(g.Turn)
		ev := throttle(g.Gen)
		ev.Sent = 1
		s.Step(now, ev)
	}
	fill := s.rate.fill
	for range 50 {
		g := s.Step(now, Event{Kind: Reserve}).Grant
		now = now.Add(g.Turn)
		s.Step(now, throttle(g.Gen))
	}
	assert.Equal(t, fill, s.rate.fill, "held: no cut")
	for i := 0; s.Step(now, Event{Kind: Reserve}).Turn < 2*time.Second; i++ {
		require.Less(t, i, 1_000_000, "the queue never reached 2 s")
	}
	g := s.Step(now, Event{Kind: Reserve, Deadline: now.Add(time.Second)}).Grant
	assert.True(t, g.Held, "past the deadline while held: wait for the hold")
	assert.False(t, g.Refused || g.Paced)
	fx := s.Step(now.Add(time.Millisecond), success(s.sched.gen))
	assert.True(t, fx.Unhold)
	assert.NotEqual(t, ModeHeld, s.mode)
}

// A storm's cold outage: a thousand callers at once on a new key, slow
// start's window sent, the rest waiting for slots, every answer refused.
// The refusals engage the key at a guess, and the waiters, woken, ask
// for turns: none is refused for its deadline before the key has had a
// success, since the rate is no forecast yet; they wait (held), taking
// no turn, until the server answers. A server's pause past the deadline
// is still refused at once.
func TestColdOutageWaitsAreNoForecast(t *testing.T) {
	s := New(&Config{MinRate: DefaultMinRate, InitialWindow: DefaultInitialWindow})
	now := pacerEpoch
	const callers = 1000
	waiting := 0
	for range callers {
		if fx := s.Step(now, Event{Kind: Admit}); fx.WaitSlot {
			waiting++
		}
	}
	require.Equal(t, callers-DefaultInitialWindow, waiting)
	now = now.Add(100 * time.Millisecond) // a server busy with a thousand connections
	for i := 0; !s.Engaged(); i++ {
		require.Less(t, i, DefaultInitialWindow, "not engaged by the window's refusals")
		ev := throttle(0)
		ev.Slot = true
		if i == 0 {
			ev.Sent = DefaultInitialWindow
		}
		s.Step(now, ev)
	}
	deadline := now.Add(8 * time.Second)
	paced, held := 0, 0
	for range waiting {
		s.Step(now, Event{Kind: Woke})
		require.False(t, s.Step(now, Event{Kind: Admit}).WaitSlot, "slow start ended")
		g := s.Step(now, Event{Kind: Reserve, Deadline: deadline}).Grant
		require.False(t, g.Refused, "refused for a deadline %v out, at %.0f/s, nothing ever accepted", g.Turn, s.Rate())
		if g.Held {
			held++
		} else {
			paced++
		}
	}
	require.Positive(t, held, "the queue at the first cut reached past the deadline (%d paced at %.0f/s)", paced, s.Rate())

	// Paused by the server past the deadline: refused at once.
	hint := throttle(s.Gen())
	hint.Hinted, hint.Wait = true, 10*time.Second
	s.Step(now, hint)
	g := s.Step(now, Event{Kind: Reserve, Deadline: deadline}).Grant
	assert.True(t, g.Refused, "a pause past the deadline is the server's word")
	assert.False(t, g.Held || g.Paced)
}

// The state is plain values and step reads nothing but its inputs: two
// copies given the same events agree, field for field, whatever came
// before.
func TestCoreIsPure(t *testing.T) {
	assertPlain(t, reflect.TypeFor[State](), "State")
	rnd := rand.New(rand.NewPCG(1, 2))
	cfg := &Config{Adapt: Cubic, MinRate: DefaultMinRate, InitialWindow: 10}
	a := New(cfg)
	now := pacerEpoch
	var b State
	for i := range 5000 {
		now = now.Add(time.Duration(rnd.IntN(int(5 * time.Millisecond))))
		ev := randomEvent(rnd, &a)
		if i == 1000 {
			b = a // a copy is the whole state
		}
		fa := a.Step(now, ev)
		if i >= 1000 {
			fb := b.Step(now, ev)
			require.Equal(t, fa, fb, "event %d", i)
			require.Equal(t, a, b, "event %d", i)
		}
	}
	assert.True(t, a.Engaged() || a.meter.sends() > 0, "the events did something")
}

// assertPlain fails if a field of typ, or of a struct within it, is a
// lock, an atomic, a channel, a function, a map, a slice, an interface
// or a pointer other than cfg (the settings, which never change).
func assertPlain(t *testing.T, typ reflect.Type, path string) {
	t.Helper()
	if pkg := typ.PkgPath(); pkg == "sync" || pkg == "sync/atomic" || pkg == "context" {
		t.Errorf("%s is a %s", path, typ)
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		if typ == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if path == "State" && f.Name == "cfg" {
				continue
			}
			assertPlain(t, f.Type, path+"."+f.Name)
		}
	case reflect.Array:
		assertPlain(t, typ.Elem(), path+"[]")
	case reflect.Chan, reflect.Func, reflect.Map, reflect.Slice, reflect.Interface, reflect.Pointer, reflect.UnsafePointer:
		t.Errorf("%s is a %s", path, typ)
	}
}

// randomEvent returns an event a key in state s could see next.
func randomEvent(rnd *rand.Rand, s *State) Event {
	switch rnd.IntN(8) {
	case 0:
		return Event{Kind: Admit}
	case 1:
		if s.start.inflight > 0 {
			return Event{Kind: Release}
		}
	case 2:
		return Event{Kind: Reserve, Sent: 1, Deadline: pacerEpoch.Add(time.Duration(rnd.IntN(1 << 40)))}
	case 3:
		return Event{Kind: TimeLimit, Round: s.start.round}
	}
	classes := []retry.Class{retry.Success, retry.Success, retry.Throttled, retry.Throttled, retry.Transient}
	ev := Event{Kind: Answer, Class: classes[rnd.IntN(len(classes))], Answered: true, ForRate: true, Gen: s.sched.gen - uint64(rnd.IntN(2))}
	if ev.Class == retry.Success {
		ev.OK = 1
	}
	ev.Slot = s.start.inflight > 0 && rnd.IntN(2) == 0
	if rnd.IntN(20) == 0 {
		ev.Hinted, ev.Wait = true, time.Duration(rnd.IntN(int(2*time.Second)))
	}
	return ev
}
