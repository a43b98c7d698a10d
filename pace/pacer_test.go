package pace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePacer returns p with a fake clock, and a Transport over base that
// paces with it on the same clock.
func fakePacer(p *Pacer, base http.RoundTripper, opts ...retry.Option) (*retry.Transport, *retrytest.Clock) {
	clock := retrytest.NewClock(time.Now())
	p.Clock = clock
	opts = append([]retry.Option{retry.WithPacer(p), retry.WithClock(clock), retry.WithRandom(func() float64 { return 0.5 })}, opts...)
	return retry.New(base, opts...), clock
}

// statusServer answers request i with codes[i] (the last repeats), with
// the header fields headers[i] gives as name, value pairs, and counts the
// requests.
func statusServer(t *testing.T, codes []int, headers map[int][]string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(codes)-1)
		h := headers[i]
		for j := 0; j+1 < len(h); j += 2 {
			w.Header().Set(h[j], h[j+1])
		}
		w.WriteHeader(codes[i])
		fmt.Fprintf(w, "status %d", codes[i])
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func get(t *testing.T, rt http.RoundTripper, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// A key that is never refused costs nothing: its attempts never wait,
// and a turn allocates nothing.
func TestIdleKeyCostsNothing(t *testing.T) {
	p := &Pacer{}
	req := httptest.NewRequest("GET", "http://api.example/", nil)
	ok := retry.Feedback{Class: retry.Success}
	allocs := testing.AllocsPerRun(1000, func() {
		turn, err := p.Wait(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		turn.Done(ok)
	})
	assert.Zero(t, allocs)
	_, engaged := p.Rate("api.example")
	assert.False(t, engaged)
}

// Refusals that say a limit engage the key; from then on every attempt
// waits for its turn, one interval apart, and the refused retries are
// paid for by those waits, not by the retry budget.
func TestEngagesAndPaces(t *testing.T) {
	codes := []int{200, 200, 200, 200, 429, 429, 429, 429, 429, 429, 429, 200}
	srv, n := statusServer(t, codes, nil)
	p := &Pacer{}
	budget := &retry.TokenBucket{}
	rt, clock := fakePacer(p, nil, retry.WithMaxAttempts(10), retry.WithBudget(budget),
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}))
	defer rt.CloseIdleConnections()
	for range 4 {
		_, err := get(t, rt, context.Background(), srv.URL)
		require.NoError(t, err)
	}
	resp, err := get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.EqualValues(t, len(codes), n.Load())
	rate, engaged := p.Rate(srv.Listener.Addr().String())
	require.True(t, engaged, "seven refusals in a row engage the key")
	assert.Less(t, rate, 1e6)
	idle := httptest.NewRequest("GET", "http://idle.example/", nil)
	turn, err := p.Wait(context.Background(), idle)
	require.NoError(t, err)
	turn.Done(retry.Feedback{Class: retry.Success})
	rates := map[string]float64{}
	p.Rates(func(key string, r float64) bool { rates[key] = r; return true })
	assert.Equal(t, map[string]float64{srv.Listener.Addr().String(): rate}, rates, "Rates lists the engaged key alone")
	assert.Greater(t, len(clock.Waits()), 7, "the paced retries waited for their turns besides their backoffs")
	assert.GreaterOrEqual(t, budget.Tokens(), 500-6*5, "refusals retried before the key engaged are charged; paced ones are not")
}

// One refusal with Retry-After at an idle key is no limit: its wait holds
// its own request's retry, and the other calls go on. Refusals that are
// a limit's pause the key for every call: a call whose deadline comes
// before the wait ends is refused at once, with the time to come back.
func TestServerHintPausesALimitedKey(t *testing.T) {
	srv, _ := statusServer(t, []int{429, 200}, map[int][]string{0: {"Retry-After", "3"}})
	p := &Pacer{}
	rt, clock := fakePacer(p, nil)
	defer rt.CloseIdleConnections()
	_, err := get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{3 * time.Second}, clock.Waits(), "the refused request waited")
	_, err = get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	assert.Len(t, clock.Waits(), 1, "the next call went at once")
	_, engaged := p.Rate(srv.Listener.Addr().String())
	assert.False(t, engaged)

	// Calls at once, most refused, each refusal with a wait: a limit.
	limited, n := statusServer(t, []int{429}, map[int][]string{0: {"Retry-After", "30"}})
	req := httptest.NewRequest("GET", limited.URL, nil)
	var turns []retry.Turn
	for range 5 {
		turn, err := p.Wait(context.Background(), req)
		require.NoError(t, err)
		turns = append(turns, turn)
	}
	turns[0].Done(retry.Feedback{Class: retry.Success})
	for _, turn := range turns[1:] {
		turn.Done(retry.Feedback{Class: retry.Throttled, Hinted: true, Wait: 30 * time.Second})
	}
	_, engaged = p.Rate(limited.Listener.Addr().String())
	require.True(t, engaged)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := n.Load()
	_, err = get(t, rt, ctx, limited.URL)
	var late *retry.TurnTooLate
	require.ErrorAs(t, err, &late)
	at, ok := retry.RetryAt(nil, err)
	require.True(t, ok)
	assert.Greater(t, at.Sub(clock.Now()), 10*time.Second)
	assert.Equal(t, before, n.Load(), "nothing sent meanwhile")
}

// A 503 that gives no server wait teaches the Pacer nothing: an outage
// or an overload, not a rate (retry.RateLimited).
func TestBare503TeachesNoRate(t *testing.T) {
	srv, _ := statusServer(t, []int{503}, nil)
	p := &Pacer{}
	rt, _ := fakePacer(p, nil, retry.WithMaxAttempts(20), retry.WithBudget(retry.NoBudget))
	defer rt.CloseIdleConnections()
	_, err := get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	_, engaged := p.Rate(srv.Listener.Addr().String())
	assert.False(t, engaged)
}

// Refusal decides which throttles are about the rate.
func TestRefusal(t *testing.T) {
	srv, _ := statusServer(t, []int{429}, nil)
	p := &Pacer{Refusal: func(retry.Feedback) bool { return false }}
	rt, _ := fakePacer(p, nil, retry.WithMaxAttempts(20), retry.WithBudget(retry.NoBudget))
	defer rt.CloseIdleConnections()
	_, err := get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	_, engaged := p.Rate(srv.Listener.Addr().String())
	assert.False(t, engaged)
}

// A wait cut short by the caller gives its turn back and returns the
// context's error.
func TestWaitCanceled(t *testing.T) {
	p := &Pacer{}
	req := httptest.NewRequest("GET", "http://api.example/", nil)
	p.init()
	// Engage the key: a new key's refusals, after an accepted answer.
	turns := make([]retry.Turn, 0, 5)
	for range 5 {
		turn, err := p.Wait(context.Background(), req)
		require.NoError(t, err)
		turns = append(turns, turn)
	}
	turns[0].Done(retry.Feedback{Class: retry.Success})
	for _, turn := range turns[1:] {
		turn.Done(retry.Feedback{Class: retry.Throttled})
	}
	_, engaged := p.Rate("api.example")
	require.True(t, engaged)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Wait(ctx, req)
	if err != nil {
		require.True(t, errors.Is(err, context.Canceled), "err %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []*Pacer{{MinRate: -1}, {Adapt: 7}} {
		err := p.Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "pace: Pacer.")
	}
	require.NoError(t, (&Pacer{}).Validate())
}
