package retry

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The percentile is the nearest rank of the latest answers, known only
// after latencyMinSamples of them, and follows the host as old answers
// leave the window.
func TestLatencyPercentile(t *testing.T) {
	l := newLatencies(nil)
	for i := 1; i < latencyMinSamples; i++ {
		l.record("a", time.Duration(i)*time.Millisecond)
	}
	_, ok := l.percentile("a", 50)
	assert.False(t, ok, "fewer than latencyMinSamples answers")
	l.record("a", latencyMinSamples*time.Millisecond) // 1..16 ms
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 8 * time.Millisecond}, {95, 16 * time.Millisecond}, {0.1, time.Millisecond}, {99.9, 16 * time.Millisecond}} {
		got, ok := l.percentile("a", tc.p)
		require.True(t, ok)
		assert.Equal(t, tc.want, got, "percentile(%v)", tc.p)
	}
	_, ok = l.percentile("b", 50)
	assert.False(t, ok, "hosts are apart")

	// A window of slow answers replaces the fast ones.
	for range latencyWindow {
		l.record("a", time.Second)
	}
	got, _ := l.percentile("a", 50)
	assert.Equal(t, time.Second, got)
}

// The kept percentile is recomputed after latencyRecompute answers, not
// on every call.
func TestLatencyPercentileKept(t *testing.T) {
	l := newLatencies(nil)
	for range latencyMinSamples {
		l.record("a", time.Millisecond)
	}
	got, _ := l.percentile("a", 99)
	require.Equal(t, time.Millisecond, got)
	for range latencyRecompute - 1 {
		l.record("a", time.Second)
	}
	got, _ = l.percentile("a", 99)
	assert.Equal(t, time.Millisecond, got, "kept")
	l.record("a", time.Second)
	got, _ = l.percentile("a", 99)
	assert.Equal(t, time.Second, got, "recomputed")
	got, _ = l.percentile("a", 50)
	assert.Equal(t, time.Millisecond, got, "another percentile is computed afresh")
}

// The windows kept are bounded, and the ones forgotten first are the
// longest unused: a busy host keeps its window among many new ones.
func TestLatencyKeysBounded(t *testing.T) {
	now := time.Now()
	l := newLatencies(func() time.Time { return now })
	for range latencyMinSamples {
		l.record("busy", time.Millisecond)
	}
	for i := range 3 * maxLatencyKeys {
		now = now.Add(100 * time.Millisecond)
		l.record(fmt.Sprint("host", i), time.Millisecond)
		if i%100 == 0 {
			l.record("busy", time.Millisecond)
		}
	}
	assert.LessOrEqual(t, l.table.Len(), maxLatencyKeys)
	_, ok := l.percentile("busy", 50)
	assert.True(t, ok, "the busy host's window was forgotten")
}

// Under a Percentile, the hedge delay is the percentile of the host's
// latencies as the Transport measured them, never below Delay.
func TestHedgeDelayFromLatencies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor time.Duration
		want  time.Duration
	}{
		{"percentile", 10 * time.Millisecond, 80 * time.Millisecond},
		{"floor", 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock *fakeClock
			var n atomic.Int64
			base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				clock.Advance(time.Duration(n.Add(1)) * 10 * time.Millisecond) // 10ms, 20ms, ...
				return answerWith(req, 200, new(atomic.Int32)), nil
			})
			rt, c := testTransport(base, WithHedge(Hedge{Delay: tc.floor, Percentile: 50}))
			clock = c
			held := &heldWaits{}
			rt.sleep = held.sleep
			for range latencyMinSamples + 1 {
				resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
				require.NoError(t, err)
				resp.Body.Close()
			}
			delays := held.waits()
			require.Len(t, delays, latencyMinSamples+1)
			assert.Equal(t, tc.floor, delays[latencyMinSamples-1], "before the 16th answer: Delay")
			assert.Equal(t, tc.want, delays[latencyMinSamples], "after 16 answers of 10..160ms")
		})
	}
}
