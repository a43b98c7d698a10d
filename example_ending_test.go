package retry_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/backoff-jitter/retry"
)

// RetryAt tells a job queue when to run a job again, instead of failing
// it: here a server asks for ten minutes, longer than the Transport will
// sleep (MaxRetryAfter), so the 503 is returned at once, with when to come
// back.
func ExampleRetryAt() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "600")
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	client := retry.NewClient(retry.WithMaxRetryAfter(time.Minute))
	defer client.CloseIdleConnections()
	start := time.Now()
	resp, err := client.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
	}
	if at, ok := retry.RetryAt(resp, err); ok {
		e, _ := retry.EndingOf(resp)
		fmt.Printf("park the job for about %v (%v after %d attempt)\n",
			at.Sub(start).Round(time.Minute), e.Reason, e.Attempts)
	}
	// Output: park the job for about 10m0s (server wait too long after 1 attempt)
}
