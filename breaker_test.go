package retry

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every turn the Breaker hands out is ended once: Done for an attempt
// sent, Abandon for one that was not (refused by the hook, the Pacer, or
// a wait cut short).
func TestBreakerTurnsEndOnce(t *testing.T) {
	for _, tc := range []struct {
		name            string
		opts            []Option
		done, abandoned int
		steps           []func(http.ResponseWriter, *http.Request)
	}{
		{"sent twice", nil, 2, 0, []func(http.ResponseWriter, *http.Request){status(503), status(200)}},
		{"refused by BeforeAttempt", []Option{WithBeforeAttempt(func(Prepare) error { return errors.New("no") })}, 0, 1,
			[]func(http.ResponseWriter, *http.Request){status(200)}},
		{"refused by the Pacer, asked before it", []Option{WithPacer(&recordingPacer{err: errors.New("no turn")})}, 0, 0,
			[]func(http.ResponseWriter, *http.Request){status(200)}},
		{"attempts run out", []Option{WithMaxAttempts(2)}, 2, 0, []func(http.ResponseWriter, *http.Request){status(503)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScript(t, tc.steps...)
			turns := &recordingPacer{} // its turns count Done and Abandon
			allows := 0
			br := breakerFunc(func(*http.Request) (Turn, error) {
				allows++
				return recordingTurn{turns}, nil
			})
			tr, _ := testTransport(sc.base, append([]Option{WithBreaker(br)}, tc.opts...)...)
			resp, err := tr.RoundTrip(mustRequest(t, "GET", sc.srv.URL, nil))
			if err == nil {
				resp.Body.Close()
			}
			assert.Equal(t, tc.done, len(turns.feedback), "Done")
			assert.Equal(t, tc.abandoned, turns.abandoned, "Abandon")
			assert.Equal(t, allows, tc.done+tc.abandoned, "turns handed out")
		})
	}
}

// A Breaker's refusal of the first attempt sends nothing; of a retry,
// returns the last answer, with StopBreaker.
func TestBreakerRefuses(t *testing.T) {
	sc := newScript(t, status(503))
	open := &CircuitOpen{Key: "k"}
	refuse := false
	br := breakerFunc(func(*http.Request) (Turn, error) {
		if refuse {
			return nil, open
		}
		refuse = true
		return recordingTurn{&recordingPacer{}}, nil
	})
	tr, _ := testTransport(sc.base, WithBreaker(br))
	resp, _, err := do(t, tr, mustRequest(t, "GET", sc.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	e, ok := EndingOf(resp)
	require.True(t, ok)
	assert.Equal(t, StopBreaker, e.Reason)
	assert.Len(t, sc.requests(), 1)

	_, err = tr.RoundTrip(mustRequest(t, "GET", sc.srv.URL, nil))
	require.ErrorIs(t, err, ErrCircuitOpen)
	assert.Len(t, sc.requests(), 1, "nothing sent on an open circuit")
	assert.Equal(t, "retry: circuit of k open", open.Error())
	assert.Equal(t, "circuit_open", StopBreaker.Label())
}
