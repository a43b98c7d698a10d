package pacecore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/stretchr/testify/assert"
)

// A token bucket's burst (nginx's burst=N, most APIs' limiters) accepts
// N+1 attempts at once: counted over the few milliseconds of a cold
// start's first cuts, they made an accepted rate ten times the limit's,
// and every cut of the cascade that followed stopped at 0.9 of the rate
// before, each paid for with refusals. While most of the answers since
// the first throttle are refused, the successes among them bound it
// instead (see acceptedRate). Ten clients far above a limit of 100 a
// second, over round trips of 1, 5 and 20 ms, were refused 411 (CUBIC)
// and 388 (AIMD) times on average for 300 successes with a burst of 10
// before, 167 and 161 after; with a burst of 20, 72 and 70 before, 37
// and 46 after.
func TestPacerColdStartAgainstABurst(t *testing.T) {
	for _, adapt := range []Adapt{Cubic, AIMD} {
		for _, c := range []struct {
			burst float64
			most  float64 // refused per run
		}{{10, 250}, {20, 60}} {
			t.Run(fmt.Sprintf("%v/burst %v", adapt, c.burst), func(t *testing.T) {
				refused := 0
				rtts := []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}
				for _, rtt := range rtts {
					p := &testPacer{Adapt: adapt, InitialWindow: -1}
					srv := &pacesim.Server{Rate: 100, Burst: c.burst, Lag: rtt / 2, Rnd: rand.New(rand.NewPCG(1, 2))}
					end, k := pacesim.Clients(t, p.state(hostRequest(t, "api.example")), srv, 10, 300, rtt, rand.New(rand.NewPCG(3, 4)))
					refused += k
					assert.Less(t, end.Sub(pacerEpoch), 3500*time.Millisecond, "300 successes at 100/s, from a burst of %v", c.burst)
				}
				assert.Less(t, float64(refused)/float64(len(rtts)), c.most, "refused per 300 successes")
			})
		}
	}
}

// Eight callers a few milliseconds from a token bucket of 200/s with a
// burst of 20, each sending its next request once the last is answered
// and retrying a refusal after a backoff, send below the rates the first
// cuts set, and meet the limit at shares the burst diluted. The test of
// shedding went on to its second stage at a rate still above the limit,
// found the share there about as high, and took the limit for shedding in
// one cold start of seven: the key went idle, and sent unpaced, with ten
// times as many refusals (see deepen).
func TestColdStartAgainstABurstIsNoShedding(t *testing.T) {
	for _, rtt := range []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond} {
		idle := 0
		for seed := range uint64(40) {
			p := &testPacer{InitialWindow: -1}
			k := &idleCount{Key: p.state(hostRequest(t, "api.example"))}
			srv := &pacesim.Server{Rate: 200, Burst: 20, Lag: rtt / 2, Rnd: rand.New(rand.NewPCG(seed, 2))}
			pacesim.Clients(t, k, srv, 8, 400, rtt, rand.New(rand.NewPCG(seed, 4)))
			idle += k.idle
		}
		assert.Zero(t, idle, "round trips of %v: keys gone idle, in 40 cold starts", rtt)
	}
}

// idleCount counts the times its key goes from engaged to idle.
type idleCount struct {
	pacesim.Key
	engaged bool
	idle    int
}

func (k *idleCount) Answer(class retry.Class, gen uint64, at time.Time) {
	k.Key.Answer(class, gen, at)
	e := k.Key.State().Engaged
	if k.engaged && !e {
		k.idle++
	}
	k.engaged = e
}

// acceptedRate is bounded by the successes since the first throttle only
// while most answers since are refused (a client kept above a limit, not
// one shed at random), for drainWindow, and over the time since.
func TestAcceptedRateAfterTheBucketEmptied(t *testing.T) {
	s := &State{}
	s.meter.bucket = pacerEpoch
	s.meter.ok = 11 // a burst's, accepted at once
	now := pacerEpoch.Add(10 * time.Millisecond)
	assert.InDelta(t, 1100, s.acceptedRate(now), 1e-6, "11 in 10 ms")
	s.meter.drain(now)
	assert.InDelta(t, 1100, s.acceptedRate(now), 1e-6, "no time since")
	s.meter.drainedRefused = 30
	later := now.Add(40 * time.Millisecond)
	assert.InDelta(t, 200, s.acceptedRate(later), 1e-6, "fewer than 8 since: at most 8 in 40 ms")
	s.meter.ok = 20
	s.meter.drainedOK = 9
	assert.InDelta(t, 225, s.acceptedRate(later), 1e-6, "9 in 40 ms, not 20 in 50")
	s.meter.drainedOK = 10
	assert.InDelta(t, 400, s.acceptedRate(later), 1e-6, "a quarter of the answers since accepted: refused at random as likely")
	s.meter.drainedOK = 9
	assert.InDelta(t, 20/(drainWindow+10*time.Millisecond).Seconds(), s.acceptedRate(now.Add(drainWindow)), 1e-6, "after drainWindow")
	s.idle()
	assert.True(t, s.meter.drained.IsZero(), "forgotten when the key goes idle: its next throttle empties the bucket again")
}
