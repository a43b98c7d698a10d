package redispace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// TestShedReport measures the fleet's Pacer against a server that refuses
// a share of requests at random, whatever their rate (a load balancer
// shedding, a flaky backend): 40 clients of one process make 15 GETs
// each, 1 s deadlines, through a Transport with and without the Pacer,
// rounds interleaved. It runs in real time (about 4 s a round), so only
// when asked:
//
//	REDISPACE_SHED_REPORT=1 go test ./redispace -run TestShedReport -v
//
// It fails today. Unlike package pace's Pacer, the fleet's has no test
// of shedding (docs/fleet.md, "What it does not do (yet)"): every second
// throttle within a second cuts the rate, to the rate accepted over the
// last second when that is lower, and refused at random that rate falls
// with each cut. At 25 % refused, 423 to 546 of 600 requests failed per
// round, 2474 of 3000 in all, against 12 without a Pacer. The test is
// the acceptance test of the mend: no more failures than without the
// Pacer (one a round of slack), and a median time no more than 1.25
// times its.
func TestShedReport(t *testing.T) {
	if os.Getenv("REDISPACE_SHED_REPORT") == "" {
		t.Skip("set REDISPACE_SHED_REPORT=1 to run the report (real time, 20 to 40 s)")
	}
	rdb, _ := startRedis(t)
	const shed, clients, requests, rounds = 0.25, 40, 15, 5
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(1, 2))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refuse := rnd.Float64() < shed
		mu.Unlock()
		if refuse {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	run := func(p retry.Pacer) (time.Duration, int64) {
		var opts []retry.Option
		if p != nil {
			opts = append(opts, retry.WithPacer(p))
		}
		client := &http.Client{Transport: retry.New(nil, opts...)}
		defer client.CloseIdleConnections()
		var failed atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range requests {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					resp, err := client.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					if err != nil || resp.StatusCode != http.StatusOK {
						failed.Add(1)
					}
					cancel()
				}
			}()
		}
		wg.Wait()
		return time.Since(start), failed.Load()
	}
	var times [2][]time.Duration
	var failed [2]int64
	for round := range rounds {
		for i, paced := range []bool{false, true} {
			var p retry.Pacer
			if paced {
				p = &Pacer{Client: rdb, Prefix: fmt.Sprintf("shed-report-%d:", round)}
			}
			d, f := run(p)
			times[i] = append(times[i], d)
			failed[i] += f
			t.Logf("round %d, Pacer %v: %v, %d of %d failed", round, paced, d.Round(time.Millisecond), f, clients*requests)
		}
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	bare, paced := median(times[0]), median(times[1])
	t.Logf("shed %.2f: failed %d without the Pacer, %d with it; median time %v and %v", shed, failed[0], failed[1], bare, paced)
	if failed[1] > failed[0]+rounds {
		t.Errorf("the Pacer failed %d requests, %d without it", failed[1], failed[0])
	}
	if paced > bare*5/4 {
		t.Errorf("median time %v with the Pacer, %v without it", paced, bare)
	}
}
