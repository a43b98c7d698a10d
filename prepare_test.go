package retry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBeforeAttemptSignsEachAttempt: the hook sees every attempt, the
// previous one's outcome, and what it sets in the header reaches the
// server on that attempt alone; the caller's request is left as it was.
func TestBeforeAttemptSignsEachAttempt(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503, "Retry-After", "0"), status(429), status(200))
		var seen []Prepare
		hook := func(pr Prepare) error {
			seen = append(seen, pr)
			pr.Request.Header.Set("Authorization", fmt.Sprintf("sig-%d", pr.Attempt))
			pr.Request.Header.Del("X-Drop")
			return nil
		}
		tr, _ := testTransport(s.base, WithBeforeAttempt(hook), WithAttemptHeader("X-Attempt"))
		req := mustRequest(t, "POST", s.srv.URL, strings.NewReader("payload"))
		req.Header.Set("Authorization", "caller")
		req.Header.Set("X-Drop", "caller")
		resp, _, err := do(t, tr, req)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)

		got := s.requests()
		require.Len(t, got, 3)
		for i, r := range got {
			assert.Equal(t, fmt.Sprintf("sig-%d", i+1), r.header.Get("Authorization"), "attempt %d", i+1)
			assert.Empty(t, r.header.Get("X-Drop"), "attempt %d", i+1)
		}
		assert.Equal(t, "caller", req.Header.Get("Authorization"), "the caller's request")
		assert.Equal(t, "caller", req.Header.Get("X-Drop"), "the caller's request")

		require.Len(t, seen, 3)
		assert.Nil(t, seen[0].Previous)
		assert.Equal(t, Undecided, seen[0].Class)
		assert.Equal(t, "1", seen[0].Request.Header.Get("X-Attempt"), "the attempt header is set before the hook")
		require.NotNil(t, seen[1].Previous)
		assert.Equal(t, 503, seen[1].Previous.Response.StatusCode)
		assert.Equal(t, Throttled, seen[1].Class)
		assert.Equal(t, 429, seen[2].Previous.Response.StatusCode)
		assert.Equal(t, 2, seen[2].Previous.Attempt)
	})
}

// TestBeforeAttemptRefuses: an error from the hook ends the call before
// anything more is sent, with the caller's body closed once, and the
// error reachable with errors.Is.
func TestBeforeAttemptRefuses(t *testing.T) {
	errNoToken := errors.New("no token")
	forEachProto(t, func(t *testing.T, p proto) {
		for _, tc := range []struct {
			name   string
			refuse int // the attempt refused
			body   bool
		}{{"first", 1, false}, {"first with a body", 1, true}, {"retry", 2, false}, {"retry with a body", 2, true}} {
			t.Run(tc.name, func(t *testing.T) {
				s := newScriptOver(t, p, status(503), status(200))
				var dones []Summary
				tr, _ := testTransport(s.base,
					WithBeforeAttempt(func(pr Prepare) error {
						if pr.Attempt == tc.refuse {
							return errNoToken
						}
						return nil
					}),
					WithOnDone(func(sm Summary) { dones = append(dones, sm) }))
				req := mustRequest(t, "GET", s.srv.URL, nil)
				var body *countingCloser
				if tc.body {
					body = &countingCloser{Reader: &opaqueReader{strings.NewReader("payload")}}
					req.Body, req.ContentLength = body, -1
				}
				resp, err := tr.RoundTrip(req)
				require.Nil(t, resp)
				require.ErrorIs(t, err, errNoToken)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, StopBeforeAttempt, e.Reason)
				assert.Equal(t, tc.refuse-1, e.Attempts)
				assert.Len(t, s.requests(), tc.refuse-1, "attempts the server saw")
				if body != nil {
					assert.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed once")
				}
				require.Len(t, dones, 1)
				assert.Equal(t, StopBeforeAttempt, dones[0].Reason)
				assert.True(t, StopBeforeAttempt.GaveUp())
			})
		}
	})
}

// TestBeforeAttemptAbandonsTheTurn: an attempt the hook refuses gives its
// Pacer turn back.
func TestBeforeAttemptAbandonsTheTurn(t *testing.T) {
	s := newScript(t, status(200))
	pacer := &recordingPacer{}
	tr, _ := testTransport(s.base, WithPacer(pacer), WithBeforeAttempt(func(Prepare) error { return errors.New("no") }))
	_, err := tr.RoundTrip(mustRequest(t, "GET", s.srv.URL, nil))
	require.Error(t, err)
	assert.Equal(t, 1, pacer.waits)
	assert.Equal(t, 1, pacer.abandoned)
	assert.Empty(t, pacer.feedback)
}

// TestPerRequestBeforeAttemptRunsAfter: a per-request hook runs after the
// Transport's, and not when the Transport's refused.
func TestPerRequestBeforeAttemptRunsAfter(t *testing.T) {
	s := newScript(t, status(200))
	var order []string
	refuse := false
	tr, _ := testTransport(s.base, WithBeforeAttempt(func(Prepare) error {
		order = append(order, "transport")
		if refuse {
			return errors.New("refused")
		}
		return nil
	}))
	req := mustRequest(t, "GET", s.srv.URL, nil)
	req = req.WithContext(ContextWithOptions(req.Context(), WithBeforeAttempt(func(pr Prepare) error {
		order = append(order, "request")
		pr.Request.Header.Set("X-Request", "1")
		return nil
	})))
	_, _, err := do(t, tr, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"transport", "request"}, order)
	assert.Equal(t, "1", s.requests()[0].header.Get("X-Request"))

	order, refuse = nil, true
	_, err = tr.RoundTrip(req)
	require.Error(t, err)
	assert.Equal(t, []string{"transport"}, order)
}
