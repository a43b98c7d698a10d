package pace

import (
	"net/http"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/internal/pacesim"
)

// TestGoldenTraces replays every golden scenario of package pacesim
// through a Pacer's entry, as Wait and Turn.Done drive it, on the fake
// clock: the counts made without the lock, the lock-free idle path and
// the mirrors of the state must decide as the core stepped for every
// event does (internal/pacecore's TestGoldenTraces).
func TestGoldenTraces(t *testing.T) {
	pacesim.Check(t, func(s pacesim.Setup) pacesim.Key {
		p := &Pacer{InitialWindow: s.InitialWindow}
		if s.AIMD {
			p.Adapt = AdaptAIMD
		}
		return simKey{p.state(hostRequest(t, "api.example"))}
	}, nil, false, "")
}

// simKey drives an entry for the simulations.
type simKey struct{ e *entry }

func (k simKey) Reserve(at time.Time) (time.Duration, pacesim.Turn) {
	d, res := k.e.reserveAt(at)
	if res == nil {
		return d, nil
	}
	return d, res
}

func (k simKey) Send() { k.e.sent.Add(1) }

func (k simKey) Answer(class retry.Class, gen uint64, at time.Time) {
	k.e.answer(retry.Feedback{Class: class, Response: &http.Response{}}, false, gen, at)
}

func (k simKey) State() pacesim.State {
	k.e.mu.Lock()
	defer k.e.mu.Unlock()
	st := &k.e.st
	return pacesim.State{Rate: st.Rate(), Engaged: st.Engaged(), Gen: st.Gen(),
		Paused: st.Paused(), Held: st.Mode() == pacecore.ModeHeld}
}

func (r *reservation) Gen() uint64 { return r.gen }
func (r *reservation) Stale() bool { return r.stale() }
