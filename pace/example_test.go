package pace_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
)

// A Pacer learns a host's rate from its throttling: here the server
// refuses the first three requests with 429. Three refusals in a row
// among a host's first answers engage the Pacer for the host (seven
// after successes), and the retry (and every later attempt to the host)
// waits for its turn. Refusals now and then engage nothing: retried with
// backoff, they cost less than pacing would.
func ExamplePacer() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 3 { // refused at first: over the limit
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	pacer := &pace.Pacer{
		// Key by what the API limits: the host here, an account or an
		// API key elsewhere.
		Key: func(r *http.Request) string { return r.URL.Host },
	}
	client := &http.Client{Transport: retry.New(nil,
		retry.WithPacer(pacer),
		retry.WithBackoff(retry.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond, Jitter: retry.FullJitter}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	_, engaged := pacer.Rate(srv.Listener.Addr().String())
	fmt.Println(resp.StatusCode, "after", n.Load(), "attempts; pacing the host:", engaged)
	// Output: 200 after 4 attempts; pacing the host: true
}
