package pacecore

import (
	"time"

	"github.com/backoff-jitter/retry/internal/pacesim"
)

// simKey drives one State from the simulator's single goroutine: every
// event a step, as the driver takes them (it counts an idle key's sends
// and calm successes without a step, which decides the same).
type simKey struct {
	st   State
	sent int64
	now  time.Time
}

func newSimKey(cfg Config) *simKey {
	if cfg.MinRate == 0 {
		cfg.MinRate = DefaultMinRate
	}
	return &simKey{st: New(&cfg)}
}

type simTurn struct {
	k   *simKey
	gen uint64
}

func (t simTurn) Gen() uint64 { return t.gen }
func (t simTurn) Stale() bool { return t.k.st.Stale(t.gen) }

func (k *simKey) Reserve(at time.Time) (time.Duration, pacesim.Turn) {
	fx := k.st.Step(at, Event{Kind: Reserve, Sent: k.sent})
	k.sent, k.now = 0, at
	if !fx.Paced {
		return 0, nil
	}
	return fx.Wait, simTurn{k, fx.Gen}
}

func (k *simKey) Send() { k.sent++ }

func (k *simKey) Answer(r pacesim.Reply, gen uint64, at time.Time) {
	k.st.Step(at, Event{Kind: Answer, Accepted: !r.Refused, Refused: r.Refused, Hinted: r.Hint > 0, Wait: r.Hint, Gen: gen, Sent: k.sent})
	k.sent, k.now = 0, at
}

func (k *simKey) State() pacesim.State {
	return pacesim.State{Rate: k.st.Rate(k.now), Engaged: k.st.Engaged(), Mode: uint8(k.st.mode), Gen: k.st.Gen()}
}
