package pacecore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/pacesim"
)

// A state encoded and decoded decides as the state it was: states taken
// along simulated runs, and then stepped the same way, stay the same.
func TestCodecRoundTrip(t *testing.T) {
	for _, aimd := range []Adapt{Cubic, AIMD} {
		k := newSimKey(Config{Adapt: aimd, InitialWindow: 4})
		srv := &pacesim.Server{Rate: 100, Burst: 10, Shed: 0.1, Lag: time.Millisecond, Rnd: rand.New(rand.NewPCG(1, 2))}
		pacesim.Clients(t, k, srv, 20, 300, time.Millisecond, rand.New(rand.NewPCG(3, 4)))
		k.st.Step(k.now, Event{Kind: Answer, Accepted: true, Quota: Quota{Remaining: 40, Reset: k.now.Add(time.Second)}})
		b, err := k.st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back := New(k.st.cfg)
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		again, _ := back.MarshalBinary()
		if string(again) != string(b) {
			t.Fatalf("a0%d: decoded state encodes differently", aimd)
		}
		at := k.now.Add(time.Millisecond)
		for i := range 50 {
			ev := Event{Kind: Answer, Refused: i%3 == 0, Accepted: i%3 != 0, Gen: k.st.Gen()}
			if i%5 == 4 {
				ev = Event{Kind: Reserve} // a published quota spaces the turns
			}
			a, b := k.st.Step(at, ev), back.Step(at, ev)
			if !sameEffects(a, b) {
				t.Fatalf("a%d, step %d: %+v; decoded %+v", aimd, i, b, a)
			}
			at = at.Add(3 * time.Millisecond)
		}
	}
}

// Bytes that are not a state are refused, and leave the state alone.
func TestCodecRefuses(t *testing.T) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	good, _ := st.MarshalBinary()
	for _, b := range [][]byte{nil, {}, {1}, good[:len(good)-1], append(good, 0), append([]byte{codecVersion + 1}, good[1:]...)} {
		s := New(&cfg)
		if err := s.UnmarshalBinary(b); err == nil {
			t.Errorf("UnmarshalBinary(%d bytes) = nil", len(b))
		}
	}
}

// FuzzCodec: no input makes UnmarshalBinary panic, and what it accepts
// encodes back to the same bytes.
func FuzzCodec(f *testing.F) {
	cfg := Config{MinRate: DefaultMinRate}
	st := New(&cfg)
	good, _ := st.MarshalBinary()
	f.Add(good)
	f.Add([]byte{codecVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := New(&cfg)
		if s.UnmarshalBinary(b) != nil {
			return
		}
		again, _ := s.MarshalBinary()
		if string(again) != string(b) {
			t.Errorf("%x decodes, and encodes as %x", b, again)
		}
	})
}

// sameEffects compares effects whose times may be in other locations (a
// decoded time is read in the local one).
func sameEffects(a, b Effects) bool {
	times := func(g *Grant) [3]int64 {
		out := [3]int64{g.At.UnixNano(), g.Next.UnixNano(), g.Until.UnixNano()}
		g.At, g.Next, g.Until = time.Time{}, time.Time{}, time.Time{}
		return out
	}
	return times(&a.Grant) == times(&b.Grant) && a == b
}
