package retry

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RequestKey is the request's host unless a Transport with a Key keyed
// the call.
func TestRequestKey(t *testing.T) {
	req := httptest.NewRequest("GET", "http://api.example:8080/x", nil)
	assert.Equal(t, "api.example:8080", RequestKey(req))
	assert.Equal(t, "", RequestKey(&http.Request{}), "a request without a URL")
	s := &settings{key: func(*http.Request) string { return "tenant" }}
	keyed := s.withKey(req)
	assert.Equal(t, "tenant", RequestKey(keyed))
	assert.Equal(t, "api.example:8080", RequestKey(req), "the caller's request is not changed")
}

// One Transport.Key keys the Transport's own Pacer and its hedging's
// latency window, and each request's key is computed from the caller's
// request once per call.
func TestKeyKeysEverything(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var calls int
	tr := New(nil, WithKey(func(r *http.Request) string {
		calls++
		return "tenant"
	}), WithHedge(Hedge{Delay: time.Second, Percentile: 95}))
	defer tr.CloseIdleConnections()
	for range 3 {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 3, calls, "Key calls")
	s, _ := tr.settings()
	own := s.pacer.(*ownPacer)
	assert.True(t, own.store.Peek("tenant", func(*pacecore.State, time.Time) {}), "the Pacer's key")
	assert.Equal(t, 1, own.store.Len(), "the Pacer's keys")
	assert.NotNil(t, s.latencies.table.Peek("tenant"), "the latency window's key")
	assert.Equal(t, 1, s.latencies.table.Len(), "the latency windows")
}
