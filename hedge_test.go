package retry

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/retrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bound is how long a test waits for what a loopback server must see
// soon; never reached when the code is right.
const bound = 10 * time.Second

// hedging returns a Transport over base that hedges after 50ms, on a fake
// clock whose hedge waits end at once unless gate is not nil: then each
// waits until gate is closed, or its context ends.
func hedging(base http.RoundTripper, gate <-chan struct{}, opts ...Option) (*Transport, *summaries, *fakeClock) {
	rt, clock := testTransport(base, append([]Option{WithHedge(Hedge{Delay: 50 * time.Millisecond}), WithAttemptHeader("X-Attempt")}, opts...)...)
	sums := &summaries{}
	rt.OnDone = sums.hook
	if gate != nil {
		rt.sleep = func(ctx context.Context, d time.Duration) error {
			if d != 50*time.Millisecond {
				return clock.Sleep(ctx, d) // a backoff, not a hedge delay
			}
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return rt, sums, clock
}

// summaries records the Summary of every call.
type summaries = recorder[Summary]

// heldWaits is a sleep that records each wait and ends it only with its
// context: the hedge delays it stands for never end before the answers.
type heldWaits struct {
	mu  sync.Mutex
	all []time.Duration
}

func (h *heldWaits) sleep(ctx context.Context, d time.Duration) error {
	h.mu.Lock()
	h.all = append(h.all, d)
	h.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (h *heldWaits) waits() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.all
}

// A copy is sent of an attempt that goes unanswered: its answer is
// returned, and the first attempt is cancelled, which the server sees.
func TestHedgeAnswersForASlowAttempt(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		arrived, cancelled := make(chan struct{}), make(chan struct{})
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Attempt") == "1" {
				close(arrived)
				<-r.Context().Done() // the slow attempt: answered only by its cancellation
				close(cancelled)
				return
			}
			<-arrived // so that the first attempt is in the server when the copy wins
			io.WriteString(w, "copy "+r.Header.Get("X-Attempt"))
		}))
		var hedges []Event
		rt, sums, _ := hedging(p.base(t, srv), nil, WithOnHedge(func(e Event) { hedges = append(hedges, e) }))
		resp, body, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "copy 2", body)
		sum := sums.last(t)
		assert.Equal(t, 2, sum.Attempts)
		assert.Equal(t, 1, sum.Hedges)
		assert.True(t, sum.HedgeWon)
		require.Len(t, hedges, 1)
		assert.Equal(t, 2, hedges[0].Attempt)
		assert.Equal(t, 50*time.Millisecond, hedges[0].Delay)
		select {
		case <-cancelled:
		case <-time.After(bound):
			t.Fatal("the server never saw the first attempt cancelled")
		}
	})
}

// An attempt that answers within the delay has no copy.
func TestHedgeNotSentForAQuickAnswer(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(200))
		rt, sums, _ := hedging(s.base, make(chan struct{}))
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Len(t, s.requests(), 1)
		assert.Zero(t, sums.last(t).Hedges)
	})
}

// An unsafe request is never hedged: over thousands of calls whose
// copies would leave at once, the server executes each exactly once. The
// same calls with an Idempotency-Key are hedged, so the test can fail.
func TestHedgeNeverSendsAnUnsafeRequestTwice(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		exec := &retrytest.Executions{Header: "X-Call"}
		srv := p.server(t, exec)
		rt, _, _ := hedging(p.base(t, srv), nil)
		call := func(i int, key bool) {
			req := mustRequest(t, "POST", srv.URL, strings.NewReader("order"))
			req.Header.Set("X-Call", fmt.Sprint(i))
			if key {
				req.Header.Set("Idempotency-Key", fmt.Sprint(i))
			}
			resp, _, err := do(t, rt, req)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
		}
		const unsafe = 1000
		for i := range unsafe {
			call(i, false)
		}
		assert.Empty(t, exec.Twice(), "unsafe requests executed twice")
		assert.Equal(t, unsafe, exec.Total())
		for i := range 200 {
			call(unsafe+i, true)
		}
		assert.NotEmpty(t, exec.Twice(), "no request with an Idempotency-Key was hedged: the test proves nothing")
	})
}

// Every copy sends the caller's bytes: a body the Transport buffers (no
// GetBody), once the first attempt has sent it all, and one made again by
// GetBody.
func TestHedgeReplaysTheBody(t *testing.T) {
	payload := strings.Repeat("hedged body ", 10_000)
	forEachProto(t, func(t *testing.T, p proto) {
		for _, tc := range []struct {
			name string
			body func() io.Reader
		}{
			{"buffered", func() io.Reader { return io.MultiReader(strings.NewReader(payload)) }},
			{"GetBody", func() io.Reader { return strings.NewReader(payload) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var mu sync.Mutex
				sums := map[string][32]byte{}
				read := make(chan struct{})
				srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					mu.Lock()
					sums[r.Header.Get("X-Attempt")] = sha256.Sum256(b)
					mu.Unlock()
					if r.Header.Get("X-Attempt") == "1" {
						close(read)
						<-r.Context().Done()
						return
					}
					io.WriteString(w, "ok")
				}))
				rt, sum, _ := hedging(p.base(t, srv), read)
				req := mustRequest(t, "PUT", srv.URL, tc.body())
				resp, _, err := do(t, rt, req)
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, 1, sum.last(t).Hedges)
				mu.Lock()
				defer mu.Unlock()
				want := sha256.Sum256([]byte(payload))
				assert.Equal(t, want, sums["1"], "attempt 1's body")
				assert.Equal(t, want, sums["2"], "the copy's body")
			})
		}
	})
}

// Per request, WithHedge turns hedging on for a Transport without it, and
// WithHedge(NoHedge) off for one with it: the hedge delay is waited for,
// or not.
func TestHedgePerRequest(t *testing.T) {
	s := newScript(t, status(200))
	for _, tc := range []struct {
		name   string
		hedge  Hedge
		opt    Option
		waited []time.Duration
	}{
		{"on for one request", NoHedge, WithHedge(Hedge{Delay: time.Second}), []time.Duration{time.Second}},
		{"off for one request", Hedge{Delay: time.Second}, WithHedge(NoHedge), nil},
		{"kept", Hedge{Delay: time.Second}, WithMaxAttempts(3), []time.Duration{time.Second}},
		{"replaced", Hedge{Delay: time.Second}, WithHedge(Hedge{Delay: time.Minute}), []time.Duration{time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := testTransport(s.base, WithHedge(tc.hedge))
			held := &heldWaits{}
			rt.sleep = held.sleep
			req := mustRequest(t, "GET", s.srv.URL, nil)
			req = req.WithContext(ContextWithOptions(req.Context(), tc.opt))
			_, _, err := do(t, rt, req)
			require.NoError(t, err)
			assert.Equal(t, tc.waited, held.waits())
		})
	}
}

// A Hedge that makes no sense is refused before anything is sent.
func TestHedgeValidate(t *testing.T) {
	for _, h := range []Hedge{
		{Delay: -time.Second},
		{Delay: time.Second, MaxHedges: -1},
		{Delay: time.Second, Percentile: 100},
		{Delay: time.Second, Percentile: -5},
		{Delay: time.Second, Percentile: math.NaN()},
		{Percentile: 95},
		{MaxHedges: 2},
	} {
		err := New(nil, WithHedge(h)).Validate()
		assert.Error(t, err, "%+v", h)
	}
	for _, h := range []Hedge{{}, {Delay: time.Millisecond}, {Delay: time.Millisecond, Percentile: 99.9, MaxHedges: 3}} {
		assert.NoError(t, New(nil, WithHedge(h)).Validate(), "%+v", h)
	}
}

// BenchmarkHedgeQuickAnswer is what hedging costs a call whose first
// attempt answers within the delay, the common case: a GET through the
// Transport over an in-memory base, with and without a Hedge.
func BenchmarkHedgeQuickAnswer(b *testing.B) {
	for _, tc := range []struct {
		name  string
		hedge Hedge
	}{{"off", NoHedge}, {"on", Hedge{Delay: time.Hour}}} {
		b.Run("hedge="+tc.name, func(b *testing.B) {
			rt := New(staticTransport{}, WithHedge(tc.hedge))
			req, err := http.NewRequest("GET", "http://127.0.0.1/", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
