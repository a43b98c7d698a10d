package retry

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/retrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stallServer answers with a body of which it sends "first" at once, and
// the rest ("second") only when more is closed, or never.
func stallServer(t *testing.T, p proto, more <-chan struct{}) *httptest.Server {
	t.Helper()
	return p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "11")
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		select {
		case <-more:
			io.WriteString(w, "second")
		case <-r.Context().Done():
		}
	}))
}

// stalledAfterFirst GETs a stallServer's body through a Transport with
// a StallTimeout of a minute on a fake clock, and reads its first part;
// the response is closed when the test ends.
func stalledAfterFirst(t *testing.T, p proto, more <-chan struct{}) (*http.Response, *retrytest.Clock) {
	t.Helper()
	srv := stallServer(t, p, more)
	clk := retrytest.NewClock(time.Now())
	rt := New(p.base(t, srv), WithClock(clk), WithStallTimeout(time.Minute))
	t.Cleanup(rt.CloseIdleConnections)
	resp, err := rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	first := make([]byte, 5)
	_, err = io.ReadFull(resp.Body, first)
	require.NoError(t, err)
	require.Equal(t, "first", string(first))
	return resp, clk
}

// A Read that gets no bytes for StallTimeout fails with ErrBodyStalled,
// on the Transport's clock, not a moment before; over every protocol.
func TestStallTimeout(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		resp, clk := stalledAfterFirst(t, p, nil)
		// A minute with no Read under way stalls nothing, and leaves no
		// timer pending: the next Read sets one.
		clk.Advance(time.Minute)

		read := make(chan error, 1)
		go func() {
			_, err := resp.Body.Read(make([]byte, 10))
			read <- err
		}()
		awaitTimers(t, clk, 1)
		clk.Advance(time.Minute - time.Millisecond)
		select {
		case err := <-read:
			t.Fatalf("the read ended before the stall timeout: %v", err)
		default:
		}
		clk.Advance(time.Millisecond)
		select {
		case err := <-read:
			require.ErrorIs(t, err, ErrBodyStalled)
			var ne net.Error
			require.True(t, errors.As(err, &ne) && ne.Timeout())
		case <-time.After(10 * time.Second):
			resp.Body.Close()
			t.Fatal("the read did not end when the clock passed the stall timeout")
		}
		_, err := resp.Body.Read(make([]byte, 10))
		assert.ErrorIs(t, err, ErrBodyStalled, "a stalled body stays stalled")
	})
}

// Only a Read that waits counts: a caller that takes longer than the
// stall timeout between reads gets the whole body.
func TestStallTimeoutSlowReader(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		more := make(chan struct{})
		resp, clk := stalledAfterFirst(t, p, more)
		clk.Advance(time.Hour) // the caller is busy; nothing is read
		close(more)
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "second", string(rest))
	})
}

// A negative StallTimeout is a clear error.
func TestStallTimeoutNegative(t *testing.T) {
	rt := New(nil, WithStallTimeout(-time.Second))
	_, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1:1/", nil))
	assert.ErrorContains(t, err, "StallTimeout -1s is negative")
}
