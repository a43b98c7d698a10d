package retry

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerDelay(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name    string
		sw, max time.Duration
		long    LongWait
		jitter  Jitter
		u       float64
		want    time.Duration
		ok      bool
	}{
		{"within", 10 * s, time.Minute, ReturnLongWait, nil, 0.5, 10 * s, true},
		{"over, returned", 10 * time.Minute, time.Minute, ReturnLongWait, nil, 0.5, 0, false},
		{"over, capped", 10 * time.Minute, time.Minute, CapLongWait, nil, 0.5, time.Minute, true},
		{"spread", 10 * s, time.Minute, ReturnLongWait, Spread(0.2), 0.5, 11 * s, true},
		{"spread, at the cap", 55 * s, time.Minute, ReturnLongWait, Spread(0.2), 0.9, time.Minute, true},
		{"a jitter below the floor", 10 * s, time.Minute, ReturnLongWait, FullJitter, 0.1, 10 * s, true},
		{"zero", 0, time.Minute, ReturnLongWait, Spread(0.2), 0.5, 0, true},
	}
	for _, tc := range tests {
		got, ok := serverDelay(tc.sw, tc.max, tc.long, tc.jitter, tc.u)
		assert.Equal(t, tc.ok, ok, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	assert.Equal(t, "CapLongWait", CapLongWait.String())
	assert.Equal(t, "LongWait(9)", LongWait(9).String())
}

// With CapLongWait, a Retry-After beyond MaxRetryAfter is waited for as
// long as MaxRetryAfter, and the request retried; with the default it is
// returned at once.
func TestLongWaitCapped(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		for _, long := range []LongWait{ReturnLongWait, CapLongWait} {
			t.Run(long.String(), func(t *testing.T) {
				sc := newScriptOver(t, p, status(503, "Retry-After", "3600"), status(200))
				tr, clock := testTransport(sc.base, WithMaxRetryAfter(time.Minute), WithLongWait(long))
				resp, _, err := do(t, tr, mustRequest(t, "GET", sc.srv.URL, nil))
				require.NoError(t, err)
				if long == ReturnLongWait {
					assert.Equal(t, 503, resp.StatusCode)
					assert.Empty(t, clock.Waits())
					return
				}
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, []time.Duration{time.Minute}, clock.Waits())
			})
		}
	})
}

// ServerWaitJitter spreads the clients told the same Retry-After above it.
func TestServerWaitJitter(t *testing.T) {
	sc := newScript(t, status(429, "Retry-After", "10"), status(200))
	tr, clock := testTransport(sc.base, WithServerWaitJitter(Spread(0.5)))
	resp, _, err := do(t, tr, mustRequest(t, "GET", sc.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, []time.Duration{12500 * time.Millisecond}, clock.Waits(), "10s + 0.5*0.5*10s")
	assert.Error(t, (&Transport{LongWait: 2}).Validate())
}

// WaitFloor is a floor under the wait, counted as the server's: the longer
// of it and Retry-After, refused past MaxRetryAfter, and the longer of the
// Transport's and a request's.
func TestWaitFloor(t *testing.T) {
	const s = time.Second
	floor := func(d time.Duration) func(Outcome) time.Duration {
		return func(o Outcome) time.Duration {
			if o.Response != nil && o.Response.StatusCode == 503 {
				return d
			}
			return 0
		}
	}
	tests := []struct {
		name    string
		first   func(http.ResponseWriter, *http.Request)
		floor   time.Duration
		perReq  time.Duration
		waits   []time.Duration
		status  int
		fromSrv bool
	}{
		{"floor alone", status(503), 7 * s, 0, []time.Duration{7 * s}, 200, true},
		{"Retry-After longer", status(503, "Retry-After", "10"), 7 * s, 0, []time.Duration{10 * s}, 200, true},
		{"floor longer", status(503, "Retry-After", "3"), 7 * s, 0, []time.Duration{7 * s}, 200, true},
		{"past MaxRetryAfter", status(503), 10 * time.Minute, 0, nil, 503, false},
		{"a request's floor longer", status(503), 7 * s, 9 * s, []time.Duration{9 * s}, 200, true},
		{"not this outcome", status(500), 7 * s, 0, []time.Duration{50 * time.Millisecond}, 200, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScript(t, tc.first, status(200))
			var retries []Event
			tr, clock := testTransport(sc.base, WithWaitFloor(floor(tc.floor)),
				WithOnRetry(func(e Event) { retries = append(retries, e) }))
			req := mustRequest(t, "GET", sc.srv.URL, nil)
			if tc.perReq > 0 {
				req = req.WithContext(ContextWithOptions(req.Context(), WithWaitFloor(floor(tc.perReq))))
			}
			resp, _, err := do(t, tr, req)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.waits, clock.Waits())
			if len(retries) > 0 {
				assert.Equal(t, tc.fromSrv, retries[0].FromServer)
			}
		})
	}
}
