package breaker_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/breaker"
)

// A host that fails every request: after three failures in a row its
// circuit opens, and the calls after fail at once, sending nothing.
func ExampleBreaker() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer srv.Close()

	client := retry.NewClient(
		retry.WithBreaker(&breaker.Breaker{Failures: 3}),
		retry.WithMaxAttempts(1),
	)
	defer client.CloseIdleConnections()
	for range 5 {
		resp, err := client.Get(srv.URL)
		switch {
		case errors.Is(err, retry.ErrCircuitOpen):
			fmt.Println("circuit open: not sent")
		case err != nil:
			fmt.Println(err)
		default:
			resp.Body.Close()
			fmt.Println(resp.Status)
		}
	}
	fmt.Println("the server saw", hits.Load(), "requests")
	// Output:
	// 500 Internal Server Error
	// 500 Internal Server Error
	// 500 Internal Server Error
	// circuit open: not sent
	// circuit open: not sent
	// the server saw 3 requests
}
