package bench

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/hashicorp/go-cleanhttp"
)

// The server of BenchmarkHedge: most answers take hedgeFast, one in
// twenty (drawn from a seeded source, copies included) twenty times as
// long.
const (
	hedgeFast  = time.Millisecond
	hedgeSlow  = 20 * hedgeFast
	hedgeTail  = 0.05
	hedgeDelay = 3 * hedgeFast // above the fast answers, far below the slow
)

// tailServer is a loopback server with a heavy latency tail, counting the
// requests it serves.
type tailServer struct {
	*httptest.Server
	served atomic.Int64
	mu     sync.Mutex
	rng    *rand.Rand
}

func newTailServer() *tailServer {
	s := &tailServer{rng: rand.New(rand.NewPCG(1, 2))}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.served.Add(1)
		s.mu.Lock()
		d := hedgeFast
		if s.rng.Float64() < hedgeTail {
			d = hedgeSlow
		}
		s.mu.Unlock()
		select {
		case <-time.After(d):
			io.WriteString(w, "ok")
		case <-r.Context().Done(): // a copy cancelled: stop working on it
		}
	}))
	return s
}

// BenchmarkHedge sends GETs one at a time to a server whose answers take
// 1ms but for 5 % of them, which take 20ms, and reports the median and
// the 99th percentile of the calls' latency and the requests the server
// served per call: lib=none is retry's Transport without hedging,
// lib=retry hedges after 3ms, lib=retry-p90 after the 90th percentile of
// the host's latencies (at least 3ms), lib=failsafe is failsafe-go's
// hedge policy with the same 3ms. Every one sends at most one copy.
func BenchmarkHedge(b *testing.B) {
	libs := []struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}{
		{"none", func(base http.RoundTripper) http.RoundTripper { return retry.New(base) }},
		{"retry", func(base http.RoundTripper) http.RoundTripper {
			return retry.New(base, retry.WithHedge(retry.Hedge{Delay: hedgeDelay}))
		}},
		{"retry-p90", func(base http.RoundTripper) http.RoundTripper {
			return retry.New(base, retry.WithHedge(retry.Hedge{Delay: hedgeDelay, Percentile: 90}))
		}},
		{"failsafe", func(base http.RoundTripper) http.RoundTripper {
			policy := hedgepolicy.NewBuilderWithDelay[*http.Response](hedgeDelay).WithMaxHedges(1).Build()
			return failsafehttp.NewRoundTripper(base, policy)
		}},
	}
	for _, lib := range libs {
		b.Run("lib="+lib.name, func(b *testing.B) {
			srv := newTailServer()
			defer srv.Close()
			base := cleanhttp.DefaultPooledTransport()
			defer base.CloseIdleConnections()
			rt := lib.wrap(base)
			var took []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				req, err := http.NewRequest("GET", srv.URL, nil)
				if err != nil {
					b.Fatal(err)
				}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(took)
			at := func(p float64) float64 {
				return float64(took[min(int(p*float64(len(took))), len(took)-1)]) / float64(time.Millisecond)
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(float64(srv.served.Load())/float64(len(took))-1, "extra-req/op")
		})
	}
}

// What docs/comparison.md says of hedging a POST: failsafe-go's hedge
// policy sends a copy of a POST with no Idempotency-Key, which the server
// executes twice; retry's Hedge never does.
func TestHedgingAPOST(t *testing.T) {
	for _, lib := range []struct {
		name  string
		wrap  func(http.RoundTripper) http.RoundTripper
		twice bool
	}{
		{"failsafe", func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, hedgepolicy.NewBuilderWithDelay[*http.Response](time.Millisecond).Build())
		}, true},
		{"retry", func(base http.RoundTripper) http.RoundTripper {
			// On a fake clock: a copy, were one allowed, would go at once.
			return retry.New(base, retry.WithHedge(retry.Hedge{Delay: time.Millisecond}), retry.WithClock(retrytest.NewClock(time.Now())))
		}, false},
	} {
		t.Run(lib.name, func(t *testing.T) {
			var executed atomic.Int32
			second := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if executed.Add(1) == 1 {
					select { // the first execution is slow: a copy, if any, arrives meanwhile
					case <-second:
					case <-time.After(time.Second): // none came
					}
					return
				}
				close(second)
			}))
			defer srv.Close()
			base := cleanhttp.DefaultPooledTransport()
			defer base.CloseIdleConnections()
			req, err := http.NewRequest("POST", srv.URL, strings.NewReader("order"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := lib.wrap(base).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := executed.Load() > 1; got != lib.twice {
				t.Errorf("the server executed the POST %d times", executed.Load())
			}
		})
	}
}
