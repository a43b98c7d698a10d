package retry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/retrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetriesThrottledThenSucceeds(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503), status(429), status(200))
		rt, clock := testTransport(s.base)
		defer rt.CloseIdleConnections()

		resp, body, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "status 200", body)
		assert.Len(t, s.requests(), 3)
		// Exponential{100ms, 20s, FullJitter} with u = 0.5: 50ms, then 100ms.
		assert.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, clock.Waits())
		assert.EqualValues(t, 1, s.newConn.Load(), "discarded responses must be drained so the connection is reused")
	})
}

func TestMethodSafety(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		tests := []struct {
			method   string
			status   int
			key      string // the Idempotency-Key, "" for none
			attempts int
		}{
			{"GET", 500, "", 4},
			{"HEAD", 502, "", 4},
			{"PUT", 504, "", 4},
			{"DELETE", 408, "", 4},
			{"OPTIONS", 500, "", 4},
			{"POST", 500, "", 1},
			{"PATCH", 502, "", 1},
			{"POST", 500, "k-123", 4},
			{"POST", 500, " ", 1}, // an empty key marks nothing safe
			{"POST", 503, "", 4},
			{"POST", 429, "", 4},
			{"PATCH", 429, "", 4},
			{"GET", 404, "", 1},
			{"GET", 400, "", 1},
			{"GET", 401, "", 1},
			{"GET", 403, "", 1},
			{"GET", 501, "", 1},
			{"GET", 505, "", 1},
			{"GET", 200, "", 1},
			{"GET", 304, "", 1},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s %d key=%q", tt.method, tt.status, tt.key), func(t *testing.T) {
				s := newScriptOver(t, p, func(w http.ResponseWriter, r *http.Request) {
					s := status(tt.status)
					s(w, r)
				})
				rt, _ := testTransport(s.base)
				defer rt.CloseIdleConnections()
				req := mustRequest(t, tt.method, s.srv.URL, strings.NewReader("payload"))
				if tt.key != "" {
					req.Header.Set("Idempotency-Key", tt.key)
				}
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tt.status, resp.StatusCode)
				seen := s.requests()
				assert.Len(t, seen, tt.attempts)
				for _, r := range seen {
					if strings.TrimSpace(tt.key) != "" {
						assert.Equal(t, tt.key, r.header.Get("Idempotency-Key"))
					}
				}
			})
		}
	})
}

func TestAttemptVisibleToBase(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503), status(503), status(200))
		var fromCtx []int
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			fromCtx = append(fromCtx, Attempt(r.Context()))
			return s.base.RoundTrip(r)
		})
		rt, _ := testTransport(base, WithAttemptHeader("X-Attempt"))
		req := mustRequest(t, "GET", s.srv.URL, nil)
		req.Header.Set("Accept", "text/plain")
		_, _, err := do(t, rt, req)
		require.NoError(t, err)
		assert.Equal(t, []int{1, 2, 3}, fromCtx)
		for i, r := range s.requests() {
			assert.Equal(t, fmt.Sprint(i+1), r.header.Get("X-Attempt"))
		}
		assert.Empty(t, req.Header.Get("X-Attempt"), "the caller's request must not be modified")
		assert.Equal(t, 0, Attempt(context.Background()))
	})
}

func TestZeroValueTransport(t *testing.T) {
	s := newScript(t, status(503), status(200))
	rt := &Transport{}
	rt.sleep = retrytest.NewClock(time.Time{}).Sleep
	defer rt.CloseIdleConnections()
	resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	require.NoError(t, rt.Validate())
}

type closeCounter struct {
	http.RoundTripper
	n int
}

func (c *closeCounter) CloseIdleConnections() { c.n++ }

func TestCloseIdleConnectionsForwarded(t *testing.T) {
	base := &closeCounter{RoundTripper: http.DefaultTransport}
	New(base).CloseIdleConnections()
	assert.Equal(t, 1, base.n)
	(&Transport{}).CloseIdleConnections() // its own pooled transport: no panic
}

// allocSink keeps responses alive so their allocation is not optimised away.
var allocSink *http.Response

func TestFastPathAllocations(t *testing.T) {
	// The attempt's context (carrying its number) and its shallow request
	// clone cost 2. More means the fast path regressed. (An idle Pacer
	// adds none: package pace's TestIdlePacerAllocations.)
	tests := []struct {
		name string
		opts []Option
		max  float64
	}{
		{"defaults", nil, 2},
	}
	req := mustRequest(t, "GET", "http://127.0.0.1/", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Both are called through the interface, as http.Client does,
			// so the compiler cannot elide the base's own allocations in
			// one of them.
			var base, rt http.RoundTripper = staticTransport{}, New(staticTransport{}, tt.opts...)
			bare := testing.AllocsPerRun(200, func() { allocSink, _ = base.RoundTrip(req) })
			ours := testing.AllocsPerRun(200, func() { allocSink, _ = rt.RoundTrip(req) })
			t.Logf("allocs/op: base %.0f, retry %.0f", bare, ours)
			if ours-bare > tt.max {
				t.Errorf("a first-try success costs %.0f allocations more than the base transport; want at most %.0f", ours-bare, tt.max)
			}
		})
	}
}
