package redispace

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/backoff-jitter/retry/pace"
)

// conformance is the golden scenarios the fleet Pacer replays: one of
// each kind of server (random shedding, token buckets with and without a
// burst, a strict slow limit, a fixed window, a limit that moves, an
// outage cold and warm, a quiet spell), both algorithms, about 20,000
// steps in all.
var conformance = map[string]bool{
	"clients40/a0/shed0.25/seed0":       true,
	"limit/a0/100+10/shed0/c20/seed0":   true,
	"limit/a1/100+0/shed0/c20/seed0":    true,
	"limit/a1/5+0/shed0/c10/seed0":      true,
	"limit/a0/100+10/shed0.1/c20/seed0": true,
	"window/a0/q20/rtt1ms":              true,
	"steady/a1":                         true,
	"moves/to10/seed0":                  true,
	"outage/a0/warmfalse":               true,
	"outage/a1/warmtrue":                true,
	"quiet/a1/gap10s":                   true,
}

// TestConformance replays golden scenarios of package pacesim through the
// fleet Pacer, against a real redis-server, on a fake clock that stands
// for Redis's: every turn taken, every answer and the state it leaves
// must be those the core decided when it recorded them, and that package
// pace's Pacer decides (both replay every scenario). So the fleet's state
// goes through Redis whole (the encoding, the counts made by the scripts
// alone, the compare-and-set), and the answers take Turn.Done's paths
// (the success only counted, the step).
func TestConformance(t *testing.T) {
	rdb, _ := startRedis(t)
	n := 0
	pacesim.Check(t, func(s pacesim.Setup) pacesim.Key {
		n++
		k := &fleetKey{t: t}
		k.p = &Pacer{Client: rdb, Prefix: fmt.Sprintf("conform%d:", n), InitialWindow: s.InitialWindow,
			Timeout: 10 * time.Second, redisNow: func() time.Time { return k.now },
			OnFallback: func(err error) { t.Errorf("a call to Redis failed: %v", err) }}
		if s.AIMD {
			k.p.Adapt = pace.AdaptAIMD
		}
		k.key = k.p.prefix() + "api.example"
		return k
	}, func(name string) bool { return conformance[name] }, false, os.Getenv("TRACE"))
}

// fleetKey drives a key of a fleet Pacer for the simulations, as
// pacesim.Key asks: its turns are Reserve steps alone, as the golden
// traces took them (without slow start's slots), its answers Turn.Done.
type fleetKey struct {
	t   *testing.T
	p   *Pacer
	key string
	now time.Time // the fleet's clock
}

func (k *fleetKey) Reserve(at time.Time) (time.Duration, pacesim.Turn) {
	k.now = at
	fx := k.step(pacecore.Event{Kind: pacecore.Reserve})
	if !fx.Paced {
		return 0, nil
	}
	return fx.Turn, &fleetTurn{k: k, gen: fx.Gen}
}

// step steps the key's state with ev through Redis.
func (k *fleetKey) step(ev pacecore.Event) pacecore.Effects {
	ctx := context.Background()
	snap, _, err := k.p.load(ctx, k.key, opRead)
	if err != nil {
		k.t.Fatal(err)
	}
	fx, _, err := k.p.update(k.key, &snap, func(st *pacecore.State, now time.Time, n, ok int64) (pacecore.Effects, int64) {
		ev.Sent, ev.OK = n, ok
		return st.Step(now, ev), 0
	}, nil)
	if err != nil {
		k.t.Fatal(err)
	}
	return fx
}

func (k *fleetKey) Send() {
	if err := k.p.countSent(context.Background(), k.key); err != nil {
		k.t.Fatal(err)
	}
}

func (k *fleetKey) Answer(class retry.Class, gen uint64, at time.Time) {
	k.now = at
	(&turn{p: k.p, key: k.key, gen: gen}).Done(retry.Feedback{Class: class, Response: &http.Response{}})
}

func (k *fleetKey) State() pacesim.State {
	st := stateOf(k.t, k.p, k.key)
	return pacesim.State{Rate: st.Rate(), Engaged: st.Engaged(), Gen: st.Gen(),
		Paused: st.Paused(), Held: st.Mode() == pacecore.ModeHeld}
}

// fleetTurn is a turn that fleetKey.Reserve handed out.
type fleetTurn struct {
	k   *fleetKey
	gen uint64
}

func (r *fleetTurn) Gen() uint64 { return r.gen }

func (r *fleetTurn) Stale() bool {
	valid, err := r.k.p.turnValid(context.Background(), r.k.key, r.gen, false)
	if err != nil {
		r.k.t.Fatal(err)
	}
	return !valid
}

// stateOf reads the state of key (its name in Redis) as p decodes it.
func stateOf(t *testing.T, p *Pacer, key string) pacecore.State {
	t.Helper()
	snap, _, err := p.load(context.Background(), key, opRead)
	if err != nil {
		t.Fatal(err)
	}
	st := pacecore.New(p.config())
	if len(snap.state) > 0 {
		if err := st.UnmarshalBinary(snap.state); err != nil {
			t.Fatal(err)
		}
	}
	return st
}
