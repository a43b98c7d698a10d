package retrytest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
)

// A Script in place of the network, and a fake clock: the test sees every
// attempt the Transport makes, and every wait, exactly, without sleeping.
func ExampleScript() {
	script := retrytest.NewScript(
		retrytest.Unsent(nil),                      // the dial is refused
		retrytest.Respond(429, "Retry-After", "3"), // throttled
		retrytest.Respond(201),
	)
	clock := retrytest.NewClock(time.Now())
	rt := retry.New(script, retry.WithClock(clock), retry.WithRandom(func() float64 { return 0.5 }))

	req, _ := http.NewRequest(http.MethodPost, "http://api.example/orders", strings.NewReader(`{"n":1}`))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after waits of", clock.Waits())
	for i, a := range script.Attempts() {
		fmt.Printf("attempt %d: %s %s\n", i+1, a.Method, a.Body)
	}
	// Output:
	// 201 Created after waits of [50ms 3s]
	// attempt 1: POST {"n":1}
	// attempt 2: POST {"n":1}
	// attempt 3: POST {"n":1}
}

// Executions counts what a server executed per Idempotency-Key: here a
// POST is refused once with 503 (refused, so not executed, and retried),
// then executed: once.
func ExampleExecutions() {
	created := &retrytest.Executions{Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})}
	refused := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !refused {
			refused = true
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		created.ServeHTTP(w, r) // what executes the request
	}))
	defer srv.Close()

	client := retry.NewClient(retry.WithClock(retrytest.NewClock(time.Now())))
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "order-1")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status+";", "order-1 executed", created.Count("order-1"), "time; executed twice:", created.Twice())
	// Output: 201 Created; order-1 executed 1 time; executed twice: []
}
