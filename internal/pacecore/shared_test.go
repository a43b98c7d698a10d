package pacecore

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/pacesim"
)

// Processes that share a limit, each pacing by itself, refuse far less
// than unpaced ones. (Each sees refusals that its own cuts lessen only in
// part, which the tests of shedding can take for shedding: they finish
// in 1.2 to 1.3 times the unpaced time. A fleet that shares a quota paces
// as one through package redispace.)
func TestReportSharedLimit(t *testing.T) {
	ms := time.Millisecond
	for _, procs := range []int{2, 5} {
		var paced, none []time.Duration
		var refs, noneRefs []int
		for seed := range uint64(40) {
			run := func(keys []pacesim.Key) (time.Duration, int) {
				srv := &pacesim.Server{Rate: 100, Lag: ms, Rnd: rand.New(rand.NewPCG(seed, 90))}
				end, refused := pacesim.Shared(t, keys, srv, 100, 1200, 2*ms, rand.New(rand.NewPCG(seed, 91)))
				return end.Sub(pacesim.Epoch), refused
			}
			keys := make([]pacesim.Key, procs)
			for i := range keys {
				keys[i] = newSimKey(Config{})
			}
			d, r := run(keys)
			paced, refs = append(paced, d), append(refs, r)
			d, r = run([]pacesim.Key{pacesim.Unpaced{}})
			none, noneRefs = append(none, d), append(noneRefs, r)
		}
		slices.Sort(paced)
		slices.Sort(none)
		slices.Sort(refs)
		slices.Sort(noneRefs)
		report(t, "%d processes share 100/s: time p50 %v max %v (no Pacer %v); refused p50 %d max %d (no Pacer %d)",
			procs, q(paced, .5), q(paced, 1), q(none, .5), refs[20], refs[39], noneRefs[20])
		if refs[20] > noneRefs[20]/4 {
			t.Errorf("%d processes sharing a limit: %d refused (median); no Pacer %d: want a quarter or fewer", procs, refs[20], noneRefs[20])
		}
	}
}
