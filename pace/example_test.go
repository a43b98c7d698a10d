package pace_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
)

// A Pacer learns a host's rate from its throttling: here the server
// refuses the first two requests with 429, the second of which engages
// the Pacer for it, and the retry (and every later attempt to the host)
// waits for its turn.
func ExamplePacer() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 { // refused at first: over the limit
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
	client := &http.Client{Transport: retry.New(nil, retry.WithPacer(pacer))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	_, engaged := pacer.Rate(srv.Listener.Addr().String())
	fmt.Println(resp.StatusCode, "after", n.Load(), "attempts; pacing the host:", engaged)
	// Output: 200 after 3 attempts; pacing the host: true
}
