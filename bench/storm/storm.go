package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/bench"
	"github.com/backoff-jitter/retry/pace"
	"github.com/hashicorp/go-cleanhttp"
)

// Config is one storm: the server's capacity and outage, and the clients.
type Config struct {
	Clients     int           // clients that start at once, each needing one success
	Rate        float64       // the server's capacity, requests a second
	Burst       int           // the depth of its token bucket
	Concurrency int           // requests it serves at once
	Service     time.Duration // time an accepted request takes
	Outage      time.Duration // time from the start during which everything fails
	Reject      Reject        // the answer over capacity
	RetryAfter  int           // Retry-After seconds, for Reject429RetryAfter
	Deadline    time.Duration // each client's deadline, from the start
	Interval    time.Duration // the width of the time series' intervals
	Base, Cap   time.Duration // the backoff curves' base and cap (retry's strategies)
}

// DefaultConfig is the storm of the default run, for n clients.
func DefaultConfig(n int) Config {
	return Config{
		Clients:     n,
		Rate:        1000,
		Burst:       100,
		Concurrency: 32,
		Service:     10 * time.Millisecond,
		Outage:      time.Second,
		Reject:      Reject429,
		RetryAfter:  1,
		Deadline:    8 * time.Second,
		Interval:    100 * time.Millisecond,
		Base:        100 * time.Millisecond,
		Cap:         20 * time.Second,
	}
}

// maxAttempts bounds the attempts of retry's strategies, and a client's
// reissues: far more than any client makes before its deadline (no backoff
// makes about 500 in the default storm), so the deadline is what ends them.
const maxAttempts = 10_000

// Strategy is one way of retrying, shared by all the clients of a run as
// one process's http.Client would be.
type Strategy struct {
	Name string
	// New returns the round tripper of the run's clients over base.
	// onGiveUp, where the strategy is retry's, must be its OnGiveUp hook.
	New func(cfg Config, base http.RoundTripper, onGiveUp func(retry.Event)) http.RoundTripper
	// Reissue makes a client whose retry the budget refused send the
	// request again after the wait its backoff would have chosen.
	Reissue bool
	// Backoff is the curve a reissuing client waits by.
	Backoff func(cfg Config) retry.Backoff
}

func ours(curve func(Config) retry.Backoff, budget bool) func(Config, http.RoundTripper, func(retry.Event)) http.RoundTripper {
	return func(cfg Config, base http.RoundTripper, onGiveUp func(retry.Event)) http.RoundTripper {
		opts := []retry.Option{
			retry.WithBackoff(curve(cfg)),
			retry.WithMaxAttempts(maxAttempts),
			retry.WithOnGiveUp(onGiveUp),
			retry.WithPacer(retry.NoPacer), // the curve's own behaviour; see defaults
		}
		if !budget {
			opts = append(opts, retry.WithBudget(retry.NoBudget))
		} // else the Transport's own default budget
		return retry.New(base, opts...)
	}
}

// defaults is retry's Transport with its defaults (its own budget and
// Pacer) but the run's curve and attempts.
func defaults(cfg Config, base http.RoundTripper, onGiveUp func(retry.Event)) http.RoundTripper {
	return retry.New(base,
		retry.WithBackoff(exponential(retry.FullJitter)(cfg)),
		retry.WithMaxAttempts(maxAttempts),
		retry.WithOnGiveUp(onGiveUp),
	)
}

// paced is retry's strategy with its default budget and a Pacer shared by
// the run's clients, as one process's Transport would share it.
func paced(curve func(Config) retry.Backoff, adapt pace.Adapt) func(Config, http.RoundTripper, func(retry.Event)) http.RoundTripper {
	return func(cfg Config, base http.RoundTripper, onGiveUp func(retry.Event)) http.RoundTripper {
		return retry.New(base,
			retry.WithBackoff(curve(cfg)),
			retry.WithMaxAttempts(maxAttempts),
			retry.WithOnGiveUp(onGiveUp),
			retry.WithPacer(&pace.Pacer{Adapt: adapt}),
		)
	}
}

func noBackoff(Config) retry.Backoff { return retry.Constant{} }
func exponential(j retry.Jitter) func(Config) retry.Backoff {
	return func(cfg Config) retry.Backoff { return retry.Exponential{Base: cfg.Base, Cap: cfg.Cap, Jitter: j} }
}
func decorrelated(cfg Config) retry.Backoff { return retry.Decorrelated{Base: cfg.Base, Cap: cfg.Cap} }

// Strategies are the strategies of a run, in the order they are reported.
var Strategies = []Strategy{
	{Name: "no-backoff", New: ours(noBackoff, false)},
	{Name: "exponential", New: ours(exponential(nil), false)},
	{Name: "full-jitter", New: ours(exponential(retry.FullJitter), false)},
	{Name: "equal-jitter", New: ours(exponential(retry.EqualJitter), false)},
	{Name: "decorrelated", New: ours(decorrelated, false)},
	{Name: "full-jitter+budget", New: ours(exponential(retry.FullJitter), true), Reissue: true, Backoff: exponential(retry.FullJitter)},
	{Name: "full-jitter+budget/fail", New: ours(exponential(retry.FullJitter), true)},
	{Name: "full-jitter+pacer", New: paced(exponential(retry.FullJitter), pace.AdaptCubic), Reissue: true, Backoff: exponential(retry.FullJitter)},
	{Name: "full-jitter+pacer-aimd", New: paced(exponential(retry.FullJitter), pace.AdaptAIMD), Reissue: true, Backoff: exponential(retry.FullJitter)},
	{Name: "defaults", New: defaults, Reissue: true, Backoff: exponential(retry.FullJitter)},
	{Name: "retryablehttp", New: retryablehttpDefaults},
	{Name: "failsafe", New: failsafeDefaults},
}

// StrategyNamed returns the strategy called name.
func StrategyNamed(name string) (Strategy, bool) {
	i := slices.IndexFunc(Strategies, func(s Strategy) bool { return s.Name == name })
	if i < 0 {
		return Strategy{}, false
	}
	return Strategies[i], true
}

// retryablehttpDefaults is bench.RetryablehttpDefaults as a storm's
// strategy: within a deadline under 15 s, the deadline, not the number of
// retries, ends it.
func retryablehttpDefaults(_ Config, base http.RoundTripper, _ func(retry.Event)) http.RoundTripper {
	return bench.RetryablehttpDefaults(base)
}

// failsafeDefaults is bench.FailsafeDefaults as a storm's strategy.
// (Raising its retries would not make it finish: with no delay it hammers
// the server, and it leaves every discarded response open, so each retry
// holds one more connection until the request's context ends.)
func failsafeDefaults(_ Config, base http.RoundTripper, _ func(retry.Event)) http.RoundTripper {
	return bench.FailsafeDefaults(base)
}

// Result is what one strategy's run measured.
type Result struct {
	Strategy   string
	Clients    int
	Attempts   int64           // requests the server saw
	Successes  int64           // requests it answered 200
	Completion []time.Duration // per client, sorted; unfinished clients last, as -1
	Deadline   int             // clients stopped by their deadline (or a wait that would pass it)
	GaveUp     int             // clients whose library stopped before: attempts or budget spent
	Refused    int64           // RoundTrips that ended because the budget refused a retry
	Reissued   int64           // requests sent again after such a refusal
	NewConns   int64           // connections the server accepted
	Series     []int64         // requests seen per interval
	OK         []int64         // requests answered 200 per interval
	Wall       time.Duration   // from the start to the last client's end
}

// Finished returns the number of clients that got their success.
func (r Result) Finished() int {
	return len(r.Completion) - r.Unfinished()
}

// Unfinished returns the number of clients that did not.
func (r Result) Unfinished() int {
	n := 0
	for _, d := range r.Completion {
		if d < 0 {
			n++
		}
	}
	return n
}

// Quantile returns the completion time below which fraction q of all the
// clients finished, and false if that falls among the unfinished.
func (r Result) Quantile(q float64) (time.Duration, bool) {
	i := int(q*float64(len(r.Completion))+0.9999999) - 1
	i = min(max(i, 0), len(r.Completion)-1)
	d := r.Completion[i]
	return d, d >= 0
}

// PerSuccess returns the server-side attempts per success.
func (r Result) PerSuccess() float64 {
	if r.Successes == 0 {
		return 0
	}
	return float64(r.Attempts) / float64(r.Successes)
}

// Peak returns the most requests the server saw in one interval.
func (r Result) Peak() int64 {
	if len(r.Series) == 0 {
		return 0
	}
	return slices.Max(r.Series)
}

// stateKey keys a client's state in its requests' contexts, so that the
// shared OnGiveUp hook can tell the client why its RoundTrip stopped.
type stateKey struct{}

type clientState struct {
	reason   retry.StopReason
	attempts int
}

func onGiveUp(e retry.Event) {
	if st, ok := e.Request.Context().Value(stateKey{}).(*clientState); ok {
		st.reason, st.attempts = e.Reason, e.Attempt
	}
}

// Run runs one storm with strategy s and returns what the server saw and
// when each client finished.
func Run(ctx context.Context, cfg Config, s Strategy) (Result, error) {
	if cfg.Clients <= 0 || cfg.Interval <= 0 || cfg.Deadline <= 0 {
		return Result{}, errors.New("storm: Clients, Interval and Deadline must be positive")
	}
	srv := newServer(cfg)
	defer srv.Close()

	// Every client has one request in flight, so N idle connections
	// are kept: none has to be opened again, and no ephemeral port is
	// spent on a connection closed only for want of room in the pool.
	base := cleanhttp.DefaultPooledTransport()
	base.MaxIdleConns, base.MaxIdleConnsPerHost = cfg.Clients, cfg.Clients
	defer base.CloseIdleConnections()
	rt := s.New(cfg, base, onGiveUp)

	var refused, reissued atomic.Int64
	completion := make([]time.Duration, cfg.Clients)
	ends := make([]end, cfg.Clients)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	start := time.Now()
	for i := range cfg.Clients {
		wg.Go(func() {
			<-gate
			completion[i], ends[i] = client(ctx, cfg, s, rt, srv.srv.URL, start, &refused, &reissued)
		})
	}
	start = time.Now()
	srv.Start(start)
	close(gate)
	wg.Wait()
	wall := time.Since(start)

	r := Result{
		Strategy: s.Name, Clients: cfg.Clients,
		Refused: refused.Load(), Reissued: reissued.Load(),
		NewConns: srv.newConns.Load(), Wall: wall,
	}
	for _, e := range ends {
		switch e {
		case endDeadline:
			r.Deadline++
		case endGaveUp:
			r.GaveUp++
		}
	}
	r.Series, r.OK = srv.series()
	for i := range r.Series {
		r.Attempts += r.Series[i]
		r.Successes += r.OK[i]
	}
	slices.SortFunc(completion, func(a, b time.Duration) int {
		switch {
		case a < 0 && b < 0:
			return 0
		case a < 0:
			return 1
		case b < 0:
			return -1
		}
		return int(a - b)
	})
	r.Completion = completion
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	return r, nil
}

// end is how a client ended.
type end uint8

const (
	endSuccess  end = iota
	endDeadline     // its deadline passed, or its next wait would have passed it
	endGaveUp       // its library stopped first: attempts ran out, or the budget refused
)

// client sends one request until it succeeds or its deadline passes, and
// returns the time from start to its success (-1 if none) and how it ended.
func client(ctx context.Context, cfg Config, s Strategy, rt http.RoundTripper, url string, start time.Time, refused, reissued *atomic.Int64) (time.Duration, end) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(cfg.Deadline))
	defer cancel() // also tears down what a library left open
	st := new(clientState)
	ctx = context.WithValue(ctx, stateKey{}, st)
	var curve retry.Backoff
	if s.Backoff != nil {
		curve = s.Backoff(cfg)
	}
	attempts := 0          // all this client's attempts, across reissues
	var prev time.Duration // its last wait, for the curve
	for range maxAttempts {
		st.reason = retry.StopNone
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return -1, endGaveUp
		}
		resp, err := rt.RoundTrip(req)
		var serverWait time.Duration
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), endSuccess
			}
			serverWait, _ = retry.ServerWait(resp.Header, time.Now(), retry.ResetIgnore)
		}
		if st.reason != retry.StopBudget {
			if ctx.Err() != nil || st.reason == retry.StopDeadline || st.reason == retry.StopCanceled {
				return -1, endDeadline
			}
			return -1, endGaveUp
		}
		refused.Add(1)
		if !s.Reissue {
			return -1, endGaveUp
		}
		// The caller insists: it waits what the Transport would have
		// waited before its next retry, and sends the request again.
		attempts += st.attempts
		wait := max(curve.Delay(attempts, prev, rand.Float64()), serverWait)
		if dl, _ := ctx.Deadline(); time.Until(dl) < wait || !sleep(ctx, wait) {
			return -1, endDeadline
		}
		prev = wait
		reissued.Add(1)
	}
	return -1, endGaveUp
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// String describes cfg in one line.
func (cfg Config) String() string {
	return fmt.Sprintf("%d clients; capacity %g req/s (burst %d, %d at once, %v each); outage %v; over capacity %s; deadline %v; backoff base %v, cap %v",
		cfg.Clients, cfg.Rate, cfg.Burst, cfg.Concurrency, cfg.Service, cfg.Outage, cfg.Reject, cfg.Deadline, cfg.Base, cfg.Cap)
}
