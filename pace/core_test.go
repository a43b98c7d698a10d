package pace

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/backoff-jitter/retry"
)

// These tests drive a key's state through its seam, step, as the Pacer's
// entry does, with the time given: no lock, no clock, no goroutine.

func throttle(gen uint64) event {
	return event{kind: evAnswer, class: retry.Throttled, answered: true, forRate: true, gen: gen}
}

func success(gen uint64) event {
	return event{kind: evAnswer, class: retry.Success, answered: true, ok: 1, gen: gen}
}

func TestCoreSlowStart(t *testing.T) {
	s := newKeyState(&config{minRate: defaultMinRate, initialWindow: 2})
	require.Equal(t, modeSlowStart, s.mode)
	fx := s.step(pacerEpoch, event{kind: evAdmit})
	assert.True(t, fx.slot)
	assert.True(t, fx.armLimit, "the first attempt arms the time limit")
	assert.Zero(t, fx.round)
	fx = s.step(pacerEpoch, event{kind: evAdmit})
	assert.True(t, fx.slot)
	assert.False(t, fx.armLimit, "armed once")
	fx = s.step(pacerEpoch, event{kind: evAdmit})
	assert.False(t, fx.slot)
	assert.True(t, fx.waitSlot, "the window is full")

	// An answer opens one slot more, and wakes the waiter.
	ok := success(0)
	ok.slot = true
	fx = s.step(pacerEpoch, ok)
	assert.True(t, fx.wake)
	assert.Equal(t, modeSlowStart, s.mode, "an attempt waits: slow start goes on")
	s.step(pacerEpoch, event{kind: evWoke})
	fx = s.step(pacerEpoch, event{kind: evAdmit})
	assert.True(t, fx.slot)
	assert.Equal(t, 3, s.start.slots)

	// A transport error gives its slot back and opens none.
	fx = s.step(pacerEpoch, event{kind: evAnswer, class: retry.Transient, slot: true})
	assert.True(t, fx.wake)
	assert.Equal(t, 3, s.start.slots)

	// The time limit of another slow start ends nothing; its own ends it.
	fx = s.step(pacerEpoch, event{kind: evLimit, round: 1})
	assert.Equal(t, modeSlowStart, s.mode)
	assert.False(t, fx.stopLimit)
	fx = s.step(pacerEpoch, event{kind: evLimit, round: 0})
	assert.Equal(t, modeIdle, s.mode)
	assert.True(t, fx.stopLimit)
	assert.True(t, fx.wake, "the waiters go on")
	fx = s.step(pacerEpoch, event{kind: evAdmit})
	assert.False(t, fx.slot || fx.waitSlot, "out of slow start, no slot")
}

func TestCoreEngagesAndHandsOutTurns(t *testing.T) {
	s := newKeyState(&config{minRate: defaultMinRate, initialWindow: -1})
	require.Equal(t, modeIdle, s.mode)
	now := pacerEpoch
	fx := s.step(now, event{kind: evReserve, sent: 10})
	assert.False(t, fx.paced, "idle: no turn")
	for i := range coldRefusalsToEngage {
		now = now.Add(time.Millisecond)
		require.False(t, s.engaged(), "engaged after %d refusals", i)
		fx = s.step(now, throttle(0))
	}
	require.Equal(t, modePaced, s.mode, "three refusals in a row among a new key's first answers")
	assert.True(t, fx.void, "engaging voids the turns")
	interval := s.sched.interval
	require.Positive(t, interval)

	first := s.step(now, event{kind: evReserve}).grant
	require.True(t, first.paced)
	assert.Equal(t, interval, first.turn, "one interval after the cut")
	assert.Equal(t, s.sched.gen, first.gen)
	second := s.step(now, event{kind: evReserve}).grant
	assert.Equal(t, 2*interval, second.turn)

	// Given back while it is the last, a turn is handed out again.
	s.step(now, event{kind: evCancel, at: second.at, next: second.next})
	again := s.step(now, event{kind: evReserve}).grant
	assert.Equal(t, second.at, again.at)

	// Past the deadline: refused, and no turn taken.
	late := s.step(now, event{kind: evReserve, deadline: now.Add(interval)}).grant
	assert.True(t, late.refused)
	assert.False(t, late.paced)
	assert.Equal(t, 3*interval, late.turn, "the wait it would have had")
	assert.Equal(t, 3*interval, s.step(now, event{kind: evReserve}).turn)

	// A throttle of a turn paced before the cut cuts nothing more.
	fill := s.rate.fill
	s.step(now, throttle(first.gen-1))
	assert.Equal(t, fill, s.rate.fill)
	// One paced at the rate in force cuts, and voids the turns.
	fx = s.step(now.Add(time.Millisecond), throttle(first.gen))
	assert.Less(t, s.rate.fill, fill)
	assert.True(t, fx.void)
	assert.True(t, s.stale(first.gen))
}

// A key refused from its first attempt on holds its rate, and a wait past
// the deadline waits for the hold to end, which the first success ends.
func TestCoreHoldsThroughAnOutage(t *testing.T) {
	s := newKeyState(&config{minRate: defaultMinRate, initialWindow: -1})
	now := pacerEpoch
	s.step(now, event{kind: evReserve, sent: 20})
	for i := 0; s.mode != modeHeld; i++ {
		require.Less(t, i, 200, "never held")
		g := s.step(now, event{kind: evReserve}).grant
		now = now.Add(g.turn)
		ev := throttle(g.gen)
		ev.sent = 1
		s.step(now, ev)
	}
	fill := s.rate.fill
	for range 50 {
		g := s.step(now, event{kind: evReserve}).grant
		now = now.Add(g.turn)
		s.step(now, throttle(g.gen))
	}
	assert.Equal(t, fill, s.rate.fill, "held: no cut")
	for i := 0; s.step(now, event{kind: evReserve}).turn < 2*time.Second; i++ {
		require.Less(t, i, 1_000_000, "the queue never reached 2 s")
	}
	g := s.step(now, event{kind: evReserve, deadline: now.Add(time.Second)}).grant
	assert.True(t, g.held, "past the deadline while held: wait for the hold")
	assert.False(t, g.refused || g.paced)
	fx := s.step(now.Add(time.Millisecond), success(s.sched.gen))
	assert.True(t, fx.unhold)
	assert.NotEqual(t, modeHeld, s.mode)
}

// The state is plain values and step reads nothing but its inputs: two
// copies given the same events agree, field for field, whatever came
// before.
func TestCoreIsPure(t *testing.T) {
	assertPlain(t, reflect.TypeFor[keyState](), "keyState")
	rnd := rand.New(rand.NewPCG(1, 2))
	cfg := &config{adapt: AdaptCubic, minRate: defaultMinRate, initialWindow: 10}
	a := newKeyState(cfg)
	now := pacerEpoch
	var b keyState
	for i := range 5000 {
		now = now.Add(time.Duration(rnd.IntN(int(5 * time.Millisecond))))
		ev := randomEvent(rnd, &a)
		if i == 1000 {
			b = a // a copy is the whole state
		}
		fa := a.step(now, ev)
		if i >= 1000 {
			fb := b.step(now, ev)
			require.Equal(t, fa, fb, "event %d", i)
			require.Equal(t, a, b, "event %d", i)
		}
	}
	assert.True(t, a.engaged() || a.meter.sends() > 0, "the events did something")
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
			if path == "keyState" && f.Name == "cfg" {
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
func randomEvent(rnd *rand.Rand, s *keyState) event {
	switch rnd.IntN(8) {
	case 0:
		return event{kind: evAdmit}
	case 1:
		if s.start.inflight > 0 {
			return event{kind: evRelease}
		}
	case 2:
		return event{kind: evReserve, sent: 1, deadline: pacerEpoch.Add(time.Duration(rnd.IntN(1 << 40)))}
	case 3:
		return event{kind: evLimit, round: s.start.round}
	}
	classes := []retry.Class{retry.Success, retry.Success, retry.Throttled, retry.Throttled, retry.Transient}
	ev := event{kind: evAnswer, class: classes[rnd.IntN(len(classes))], answered: true, forRate: true, gen: s.sched.gen - uint64(rnd.IntN(2))}
	if ev.class == retry.Success {
		ev.ok = 1
	}
	ev.slot = s.start.inflight > 0 && rnd.IntN(2) == 0
	if rnd.IntN(20) == 0 {
		ev.hinted, ev.wait = true, time.Duration(rnd.IntN(int(2*time.Second)))
	}
	return ev
}
