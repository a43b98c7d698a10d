package pace

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
)

var okFeedback = retry.Feedback{Class: retry.Success, Response: response(200)}

// attempt sends one attempt of req through p and reports f on its turn.
func attempt(t testing.TB, p *Pacer, host string, f retry.Feedback) {
	t.Helper()
	req, err := newHostRequest(host)
	require.NoError(t, err)
	turn, err := p.Wait(context.Background(), req)
	require.NoError(t, err)
	turn.Done(f)
}

func keys(p *Pacer) int {
	n := 0
	p.keys.m.Range(func(any, any) bool { n++; return true })
	return n
}

func remembers(p *Pacer, host string) bool {
	_, ok := p.keys.m.Load(host)
	return ok
}

// TestKeyTableIsBounded: 50,000 hosts used once each leave at most
// MaxKeys keys, and the heap they leave after a GC stays under 16 MiB
// (about 50 MiB when nothing was ever forgotten).
func TestKeyTableIsBounded(t *testing.T) {
	const hosts = 50_000
	p := &Pacer{afterFunc: (&fakeLimit{}).afterFunc}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range hosts {
		attempt(t, p, fmt.Sprintf("h%d.example", i), okFeedback)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := keys(p)
	assert.LessOrEqual(t, n, defaultMaxKeys, "keys remembered")
	assert.Equal(t, int64(n), p.keys.count.Load(), "the table's count")
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d hosts: %d keys remembered, heap %+.1f MiB", hosts, n, float64(grown)/(1<<20))
	assert.Less(t, grown, int64(16<<20), "heap left by %d hosts", hosts)
	runtime.KeepAlive(p)
}

// TestKeysForgottenWhenUnused: a key unused for keyIdleAge is forgotten
// when a new key comes (at most once per sweepEvery), and one with an attempt in flight is not, however
// long that attempt takes.
func TestKeysForgottenWhenUnused(t *testing.T) {
	clk := retrytest.NewClock(pacerEpoch)
	p := &Pacer{now: clk.Now, sleep: clk.Sleep, afterFunc: (&fakeLimit{}).afterFunc}
	attempt(t, p, "done.example", okFeedback)
	req, err := newHostRequest("inflight.example")
	require.NoError(t, err)
	inflight, err := p.Wait(context.Background(), req)
	require.NoError(t, err)

	clk.Advance(keyIdleAge - time.Second)
	attempt(t, p, "new1.example", okFeedback)
	assert.True(t, remembers(p, "done.example"), "a key unused for less than keyIdleAge")

	clk.Advance(sweepEvery) // a new key sweeps no more often
	attempt(t, p, "new2.example", okFeedback)
	assert.False(t, remembers(p, "done.example"), "a key unused for keyIdleAge")
	assert.True(t, remembers(p, "inflight.example"), "a key with an attempt in flight")
	assert.True(t, remembers(p, "new1.example"))

	inflight.Done(okFeedback)
	clk.Advance(keyIdleAge)
	attempt(t, p, "new3.example", okFeedback)
	assert.False(t, remembers(p, "inflight.example"), "unused for keyIdleAge since its attempt ended")
	assert.Equal(t, int64(keys(p)), p.keys.count.Load(), "the table's count")
}

// TestForgottenKeyStartsAfresh: a key forgotten after it engaged comes
// back as a new key: not engaged, in slow start.
func TestForgottenKeyStartsAfresh(t *testing.T) {
	clk := retrytest.NewClock(pacerEpoch)
	p := &Pacer{now: clk.Now, sleep: clk.Sleep, afterFunc: (&fakeLimit{}).afterFunc}
	engageKey(t, p, clk, "api.example")
	clk.Advance(keyIdleAge)
	attempt(t, p, "other.example", okFeedback)
	require.False(t, remembers(p, "api.example"))
	_, engaged := p.Rate("api.example")
	assert.False(t, engaged)
	req, err := newHostRequest("api.example")
	require.NoError(t, err)
	assert.True(t, p.state(req).slow.Load(), "in slow start")
}

// TestOverMaxKeysEngagedLast: beyond MaxKeys, the keys that never engaged
// are forgotten before one that did, however recently they were used.
func TestOverMaxKeysEngagedLast(t *testing.T) {
	clk := retrytest.NewClock(pacerEpoch)
	p := &Pacer{MaxKeys: 8, now: clk.Now, sleep: clk.Sleep, afterFunc: (&fakeLimit{}).afterFunc}
	engageKey(t, p, clk, "engaged.example")
	for i := range 20 {
		clk.Advance(time.Second)
		attempt(t, p, fmt.Sprintf("h%d.example", i), okFeedback)
		assert.LessOrEqual(t, keys(p), 8, "keys after h%d", i)
	}
	assert.True(t, remembers(p, "engaged.example"), "the engaged key, used longest ago")
	assert.True(t, remembers(p, "h19.example"), "the key used last")
	assert.False(t, remembers(p, "h0.example"), "an idle key used long ago")
}

// TestForgetRacesNoAttempt: while keys are forgotten as fast as new ones
// come, an attempt's key is always the table's: no two states of one key
// are ever in use at once.
func TestForgetRacesNoAttempt(t *testing.T) {
	p := &Pacer{MaxKeys: 2, InitialWindow: -1}
	var wg sync.WaitGroup
	const workers, rounds = 4, 2000
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				host := fmt.Sprintf("h%d.example", (w+i)%6)
				req, err := newHostRequest(host)
				if err != nil {
					t.Error(err)
					return
				}
				turn, err := p.Wait(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				s := turnState(turn)
				if v, ok := p.keys.m.Load(host); !ok || v.(*entry) != s {
					t.Errorf("%s: an attempt in flight on a state the table does not hold", host)
				}
				turn.Done(okFeedback)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(keys(p)), p.keys.count.Load(), "the table's count")
}

func turnState(t retry.Turn) *entry {
	switch t := t.(type) {
	case *turn:
		return t.s
	case *idleTurn:
		return (*entry)(t)
	}
	panic(fmt.Sprintf("turn of type %T", t))
}

// engageKey throttles host's key until the Pacer engages for it.
func engageKey(t *testing.T, p *Pacer, clk *retrytest.Clock, host string) {
	t.Helper()
	throttle := retry.Feedback{Class: retry.Throttled, Response: response(429)}
	for range 50 {
		if _, engaged := p.Rate(host); engaged {
			return
		}
		attempt(t, p, host, throttle)
		clk.Advance(10 * time.Millisecond)
	}
	t.Fatalf("%s: not engaged after 50 throttles", host)
}

func newHostRequest(host string) (*http.Request, error) {
	return http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
}

// TestNewKeyWhileAllInUse: a new key comes while the table is full of keys
// in use; it is not forgotten by the sweep its own arrival starts (which
// would make its attempt look it up again, forever).
func TestNewKeyWhileAllInUse(t *testing.T) {
	p := &Pacer{MaxKeys: 2, InitialWindow: -1}
	var turns []retry.Turn
	for i := range 3 {
		req, err := newHostRequest(fmt.Sprintf("busy%d.example", i))
		require.NoError(t, err)
		turn, err := p.Wait(context.Background(), req)
		require.NoError(t, err)
		turns = append(turns, turn)
	}
	assert.Equal(t, 3, keys(p), "keys in use are kept above MaxKeys")
	for _, turn := range turns {
		turn.Done(okFeedback)
	}
	attempt(t, p, "next.example", okFeedback)
	assert.LessOrEqual(t, keys(p), 2, "once not in use, they are forgotten")
	assert.True(t, remembers(p, "next.example"))
}

// While more keys than MaxKeys are in use, a sweep finds them all again:
// the table is swept once it has grown a quarter of MaxKeys past them, not
// on every new key, and stays within that.
func TestSweepsAmortizedWhileOverMaxKeys(t *testing.T) {
	const limit, inUse, added = 100, 150, 500
	p := &Pacer{MaxKeys: limit, InitialWindow: -1}
	var turns []retry.Turn
	for i := range inUse {
		req, err := newHostRequest(fmt.Sprintf("busy%d.example", i))
		require.NoError(t, err)
		turn, err := p.Wait(context.Background(), req)
		require.NoError(t, err)
		turns = append(turns, turn)
	}
	before := p.keys.sweeps
	for i := range added {
		attempt(t, p, fmt.Sprintf("h%d.example", i), okFeedback)
		require.LessOrEqual(t, keys(p), inUse+limit/4, "keys after h%d", i)
	}
	sweeps := p.keys.sweeps - before
	assert.LessOrEqual(t, sweeps, added/(limit/4)+1, "sweeps for %d new keys", added)
	for _, turn := range turns {
		turn.Done(okFeedback)
	}
}
