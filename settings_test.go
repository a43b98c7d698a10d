package retry

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInvalidSettings(t *testing.T) {
	tests := []struct {
		name string
		t    *Transport
		want string
	}{
		{"negative attempts", &Transport{MaxAttempts: -1}, "MaxAttempts"},
		{"negative retry-after", &Transport{MaxRetryAfter: -time.Second}, "MaxRetryAfter"},
		{"negative buffer", &Transport{MaxBufferedBody: -1}, "MaxBufferedBody"},
		{"negative attempt timeout", &Transport{AttemptTimeout: -1}, "AttemptTimeout"},
		{"bad header", &Transport{AttemptHeader: "X Attempt"}, "AttemptHeader"},
		{"bad reset format", &Transport{RateLimitReset: 99}, "RateLimitReset"},
		{"bad backoff", &Transport{Backoff: Exponential{Base: time.Second, Cap: time.Millisecond}}, "Cap"},
		{"bad multiplier", &Transport{Backoff: Exponential{Base: time.Second, Multiplier: 0.5}}, "Multiplier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
			cc := &countingCloser{Reader: strings.NewReader("x")}
			req := mustRequest(t, "POST", "http://127.0.0.1:1/", cc)
			resp, err2 := tt.t.RoundTrip(req)
			assert.Nil(t, resp)
			assert.Equal(t, err, err2)
			assert.EqualValues(t, 1, cc.closes.Load(), "the body is closed on errors too")
		})
	}
}

// A Transport reads its fields once, at first use: a field changed after
// Validate changes nothing, neither the attempts nor the header nor the
// hooks, and an invalid value set then is not read at all.
func TestFieldsReadOnceAtFirstUse(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		rt, _ := testTransport(s.base)
		require.NoError(t, rt.Validate())
		retries := 0
		rt.MaxAttempts = 2
		rt.AttemptHeader = "X Bad Header"
		rt.OnRetry = func(Event) { retries++ }
		rt.Budget = NoBudget
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, s.requests(), 4, "MaxAttempts as it was at first use")
		assert.Zero(t, retries, "OnRetry as it was at first use")
		for _, r := range s.requests() {
			assert.Empty(t, r.header.Values("X Bad Header"))
		}
	})
}

// The retry loop reads no field of its Transport after first use: under
// the race detector, RoundTrip calls running while every field is
// written report no race.
func TestRoundTripReadsNoFieldAfterFirstUse(t *testing.T) {
	s := newScript(t, status(503), status(200))
	rt, _ := testTransport(s.base, WithPacer(&recordingPacer{}), WithOnRetry(func(Event) {}),
		WithOnDone(func(Summary) {}), WithAttemptHeader("X-Attempt"), WithAttemptTimeout(time.Minute))
	require.NoError(t, rt.Validate())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				fillTransport(t, rt)
			}
		}
	})
	for range 20 {
		_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
	}
	close(done)
	wg.Wait()
}

// A field's own Validate error is named after the field, with its prefix
// said once, and stays reachable with errors.As.
func TestInvalidFieldError(t *testing.T) {
	err := New(nil, WithBackoff(Exponential{Base: time.Second, Multiplier: 0.5})).Validate()
	require.EqualError(t, err, "retry: invalid Backoff: Exponential.Multiplier 0.5 is less than 1")
	var f *invalidField
	require.ErrorAs(t, err, &f)
	assert.Equal(t, "Backoff", f.field)
}
