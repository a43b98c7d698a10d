package retry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/backoff-jitter/retry"
)

// A Hedge sends a copy of a safe request that goes unanswered for its
// Delay; the first answer wins and the other attempt is cancelled. Here
// the server stalls on the first attempt until it is cancelled, and
// answers the copy at once.
func ExampleWithHedge() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Attempt") == "1" {
			<-r.Context().Done() // a stalled replica
			return
		}
		fmt.Fprintf(w, "answered by attempt %s", r.Header.Get("X-Attempt"))
	}))
	defer srv.Close()

	client := retry.NewClient(
		retry.WithHedge(retry.Hedge{Delay: 20 * time.Millisecond}),
		retry.WithAttemptHeader("X-Attempt"),
		retry.WithOnDone(func(s retry.Summary) {
			fmt.Printf("attempts %d, of which copies %d; a copy won: %v\n", s.Attempts, s.Hedges, s.HedgeWon)
		}),
	)
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output:
	// attempts 2, of which copies 1; a copy won: true
	// answered by attempt 2
}
