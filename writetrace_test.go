package retry

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An unsafe request reset after it was written is not replayed: the server
// may have processed it.
func TestUnsafeRequestResetIsNotReplayed(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var executions atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			executions.Add(1)
			// HTTP/1.1: the connection is closed; HTTP/2: the stream is reset
			// (INTERNAL_ERROR).
			panic(http.ErrAbortHandler)
		}))
		var gaveUp Event
		rt, _ := testTransport(p.base(t, srv), WithOnGiveUp(func(e Event) { gaveUp = e }))
		defer rt.CloseIdleConnections()
		_, err := rt.RoundTrip(mustRequest(t, "POST", srv.URL, strings.NewReader("charge $10")))
		require.Error(t, err)
		assert.EqualValues(t, 1, executions.Load())
		assert.Equal(t, StopUnsafe, gaveUp.Reason)
		assert.Equal(t, Transient, gaveUp.Class)

		// The same failure for a GET is retried.
		executions.Store(0)
		_, err = rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
		require.Error(t, err)
		assert.EqualValues(t, 4, executions.Load())
	})
}
