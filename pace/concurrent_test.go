package pace

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/stretchr/testify/assert"
)

// Kinds of simEvent.
const (
	simWant   = iota // an attempt wants to go: it takes a turn
	simTurn          // its turn is due, unless void
	simAnswer        // its answer arrives
)

// simEvent is one step of a client of simClients.
type simEvent struct {
	at    time.Time
	kind  int
	tries int          // the attempts of the request refused so far
	res   *reservation // simTurn: the turn
	class retry.Class  // simAnswer: the answer
	gen   uint64       // simAnswer: the generation it was paced at
}

// simEvents is a queue of simEvents by time (container/heap).
type simEvents []simEvent

func (q simEvents) Len() int           { return len(q) }
func (q simEvents) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q simEvents) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *simEvents) Push(x any)        { *q = append(*q, x.(simEvent)) }
func (q *simEvents) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simClients runs clients at once on the fake clock, each sending its
// requests one after another through p to srv and retrying a refused
// attempt after a backoff with full jitter (10 ms doubled for each
// attempt, up to a second), each answered rtt after it is sent. Turns
// are taken as Wait takes them: when an attempt wants to go, and again
// when the turn it waits for is void. p's slow start is not simulated
// (InitialWindow must be negative). It returns when n requests have
// succeeded, and the attempts refused on the way.
func simClients(t *testing.T, p *Pacer, srv *simServer, clients, n int, rtt time.Duration, rnd *rand.Rand) (end time.Time, refused int) {
	t.Helper()
	if p.InitialWindow >= 0 {
		t.Fatal("simClients does not simulate slow start")
	}
	s := p.state(hostRequest(t, "api.example"))
	q := &simEvents{}
	for range clients {
		heap.Push(q, simEvent{at: pacerEpoch, kind: simWant})
	}
	send := func(at time.Time, gen uint64, tries int) {
		s.sent.Add(1)
		heap.Push(q, simEvent{at: at.Add(rtt), kind: simAnswer, class: srv.answer(at), gen: gen, tries: tries})
	}
	for done := 0; done < n; {
		e := heap.Pop(q).(simEvent)
		end = e.at
		switch {
		case e.kind == simAnswer:
			p.observeState(s, false, retry.Feedback{Class: e.class, Response: &http.Response{}}, e.gen, e.at)
			srv.trace.answer(s, e.at, e.class, e.gen)
			if e.class == retry.Success {
				done++
				heap.Push(q, simEvent{at: e.at, kind: simWant})
				continue
			}
			refused++
			backoff := min(time.Second, 10*time.Millisecond<<min(e.tries, 10))
			heap.Push(q, simEvent{at: e.at.Add(time.Duration(rnd.Int64N(int64(backoff)))), kind: simWant, tries: e.tries + 1})
		case e.kind == simTurn && !e.res.stale():
			send(e.at, e.res.gen, e.tries)
		default: // wants to go, or its turn is void
			d, res := s.reserveAt(e.at)
			srv.trace.turn(e.at, d, res)
			if res == nil {
				send(e.at, 0, e.tries) // not engaged
				continue
			}
			heap.Push(q, simEvent{at: e.at.Add(d), kind: simTurn, res: res, tries: e.tries})
		}
	}
	return end, refused
}

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
	for _, adapt := range []Adapt{AdaptCubic, AdaptAIMD} {
		for _, c := range []struct {
			burst float64
			most  float64 // refused per run
		}{{10, 250}, {20, 60}} {
			t.Run(fmt.Sprintf("%v/burst %v", adapt, c.burst), func(t *testing.T) {
				refused := 0
				rtts := []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}
				for _, rtt := range rtts {
					p := &Pacer{Adapt: adapt, InitialWindow: -1}
					srv := &simServer{rate: 100, burst: c.burst, lag: rtt / 2, rnd: rand.New(rand.NewPCG(1, 2))}
					end, k := simClients(t, p, srv, 10, 300, rtt, rand.New(rand.NewPCG(3, 4)))
					refused += k
					assert.Less(t, end.Sub(pacerEpoch), 3500*time.Millisecond, "300 successes at 100/s, from a burst of %v", c.burst)
				}
				assert.Less(t, float64(refused)/float64(len(rtts)), c.most, "refused per 300 successes")
			})
		}
	}
}

// acceptedRate is bounded by the successes since the first throttle only
// while most answers since are refused (a client kept above a limit, not
// one shed at random), for drainWindow, and over the time since.
func TestAcceptedRateAfterTheBucketEmptied(t *testing.T) {
	s := &keyState{}
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
