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

// A Pacer learns a host's rate from its refusals: here the server
// accepts one request, then refuses the next four with 429. Refusals
// that far outnumber what the server accepts engage the Pacer for the
// host, and the retry (and every later attempt to the host) waits for
// its turn. Refusals now and then engage nothing: retried with backoff,
// they cost less than pacing would.
func ExamplePacer() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i := n.Add(1); i > 1 && i <= 5 { // over the limit
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
		retry.WithMaxAttempts(6),
	)}
	for range 2 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "after", n.Load(), "attempts")
	}
	_, engaged := pacer.Rate(srv.Listener.Addr().String())
	fmt.Println("pacing the host:", engaged)
	// Output:
	// 200 after 1 attempts
	// 200 after 6 attempts
	// pacing the host: true
}
