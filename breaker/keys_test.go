package breaker

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/backoff-jitter/retry"
)

func hostReq(i int) *http.Request {
	return httptest.NewRequest("GET", fmt.Sprintf("http://h%d.example/", i), nil)
}

// 60,000 hosts used once leave a bounded table: no more circuits than
// MaxKeys, and a heap that does not grow with the hosts.
func TestCircuitsAreBounded(t *testing.T) {
	const hosts = 60_000
	b := &Breaker{}
	ok := retry.Feedback{Class: retry.Success}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range hosts {
		turn, err := b.Allow(hostReq(i))
		require.NoError(t, err)
		turn.Done(ok)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d hosts: %d circuits kept, heap %+.1f MiB", hosts, b.circuits.Len(), float64(grown)/(1<<20))
	assert.LessOrEqual(t, b.circuits.Len(), 10_000, "circuits kept")
	assert.Less(t, grown, int64(8<<20), "heap left by %d hosts", hosts)
	runtime.KeepAlive(b)
}

// Over MaxKeys, quiet circuits go before open ones: an open circuit holds
// among many hosts used once.
func TestOpenCircuitOutlivesQuietOnes(t *testing.T) {
	b, clk := newBreaker(&Breaker{Failures: 1, MaxKeys: 100, OpenFor: time.Minute})
	down := hostReq(-1)
	turn, err := b.Allow(down)
	require.NoError(t, err)
	turn.Done(retry.Feedback{Class: retry.Transient})
	for i := range 1_000 {
		clk.advance(10 * time.Millisecond)
		turn, err := b.Allow(hostReq(i))
		require.NoError(t, err)
		turn.Done(retry.Feedback{Class: retry.Success})
	}
	assert.LessOrEqual(t, b.circuits.Len(), 100)
	_, err = b.Allow(down)
	assert.ErrorIs(t, err, retry.ErrCircuitOpen, "the open circuit was forgotten")
}

// Every way an attempt's use of a circuit ends gives the circuit back to
// the table: a refusal by an open or busy half-open circuit, a turn done,
// a turn abandoned. A circuit unused for ten minutes is then forgotten;
// one held by a use that never ended would stay for ever.
func TestEveryUseEnds(t *testing.T) {
	b, clk := newBreaker(&Breaker{Failures: 1, MaxKeys: 10, OpenFor: time.Second})
	for i := range 30 {
		req := hostReq(i)
		turn, err := b.Allow(req)
		require.NoError(t, err)
		turn.Done(retry.Feedback{Class: retry.Transient}) // opens
		_, err = b.Allow(req)
		require.ErrorIs(t, err, retry.ErrCircuitOpen, "open")
		clk.advance(time.Second)
		probe, err := b.Allow(req)
		require.NoError(t, err, "the probe")
		_, err = b.Allow(req)
		require.ErrorIs(t, err, retry.ErrCircuitOpen, "half open, the probe out")
		if i%2 == 0 {
			probe.Abandon()
		} else {
			probe.Done(retry.Feedback{Class: retry.Success})
			turn, err := b.Allow(req)
			require.NoError(t, err)
			turn.Abandon()
		}
	}
	clk.advance(11 * time.Minute)
	turn, err := b.Allow(hostReq(1_000)) // a new key sweeps the table
	require.NoError(t, err)
	turn.Done(retry.Feedback{Class: retry.Success})
	assert.Equal(t, 1, b.circuits.Len(), "circuits still held after their uses ended")
}
