package pacecore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fixed window limiter accepts its quota at the start of each window and
// refuses everything after it: the key's rate must come out of the silence
// at about the quota a window, not at a fraction of it. Eight windows'
// quota, eight clients: paced at the quota's rate, the last is sent about
// 8 s in. Before resume, a cascade of cuts through each silence and a
// steady limit learned from them took 8.3 to 10 s for 10 a second, 11 to
// 16 s for 20 and 16 to 38 s for 100 (50 seeds: 8.2 to 9.5 s now, with as
// many refusals, 36 to 58 a run).
func TestPacerFixedWindowLimit(t *testing.T) {
	for _, adapt := range []Adapt{Cubic, AIMD} {
		for _, quota := range []int{10, 20, 100} {
			t.Run(fmt.Sprintf("%v/%d", adapt, quota), func(t *testing.T) {
				for _, rtt := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
					p := &testPacer{Adapt: adapt, InitialWindow: -1}
					srv := &pacesim.Server{Window: time.Second, Quota: quota, Lag: rtt / 2, Rnd: rand.New(rand.NewPCG(1, 2))}
					end, refused := pacesim.Clients(t, p.state(hostRequest(t, "api.example")), srv, 8, 8*quota, rtt, rand.New(rand.NewPCG(3, 4)))
					assert.Less(t, end.Sub(pacerEpoch), 9750*time.Millisecond, "eight windows of %d, %v round trips", quota, rtt)
					assert.LessOrEqual(t, refused, 70, "refused, %v round trips", rtt)
				}
			})
		}
	}
}

// The cuts of one silence, each 0.9 times the one before, find no steady
// limit: none of them followed a success. Counted, they made one of 16
// within a second, and the rate held below it for 8 s. (The silence holds
// the rate once it is as long as an outage's: see
// TestPacerOutageAfterSuccesses.)
func TestSilenceFindsNoSteadyLimit(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 20, 2*time.Second)
	p.observe(req, retry.Throttled, response(429), curGen(p, req), now)
	for range 30 {
		r, _ := p.Rate("api.example")
		now = now.Add(time.Duration(float64(time.Second) / r))
		p.observe(req, retry.Throttled, response(429), curGen(p, req), now)
	}
	s := p.state(req)
	require.Greater(t, s.st.outage.cutsSinceOK, 4, "the silence cut")
	assert.Zero(t, s.st.rate.steady)
	assert.Zero(t, s.st.rate.hold())
}
