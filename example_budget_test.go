package retry_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/backoff-jitter/retry"
)

// A TokenBucket shared by two Transports. While the server is down, the
// retries of the first spend the budget and the second gives up at once
// instead of adding its own; successes refill it, and retries resume.
// (Every Transport has a budget of its own by default: 500 tokens, 14
// per retry of a server that is down, as this bare 503 says, and 5 per
// retry of a rate limit's refusal. This one is small to show it at work.)
func ExampleTokenBucket() {
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	budget := &retry.TokenBucket{Capacity: 28, Refill: 4} // two retries, 14 tokens each
	newClient := func() *retry.Transport {
		return retry.New(nil,
			retry.WithBudget(budget),
			retry.WithBackoff(retry.Constant{}), // no wait, for the example
			retry.WithOnGiveUp(func(e retry.Event) {
				fmt.Printf("  gave up at attempt %d: %v\n", e.Attempt, e.Reason)
			}),
		)
	}
	a, b := newClient(), newClient()
	defer a.CloseIdleConnections()
	defer b.CloseIdleConnections()
	get := func(name string, rt *retry.Transport) {
		resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%s: %s, %d tokens left\n", name, resp.Status, budget.Tokens())
	}

	down.Store(true)
	get("a", a)
	get("b", b)
	down.Store(false)
	for range 5 {
		get("b", b)
	}
	down.Store(true)
	get("a", a)
	// Output:
	//   gave up at attempt 3: retry budget exhausted
	// a: 503 Service Unavailable, 0 tokens left
	//   gave up at attempt 1: retry budget exhausted
	// b: 503 Service Unavailable, 0 tokens left
	// b: 200 OK, 4 tokens left
	// b: 200 OK, 8 tokens left
	// b: 200 OK, 12 tokens left
	// b: 200 OK, 16 tokens left
	// b: 200 OK, 20 tokens left
	//   gave up at attempt 2: retry budget exhausted
	// a: 503 Service Unavailable, 6 tokens left
}
