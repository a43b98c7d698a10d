package githubretry_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/githubretry"
)

// GitHub answers a secondary rate limit with 403 and Retry-After, which
// the default classifier would take as permanent.
func ExampleOptions() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"You have exceeded a secondary rate limit."}`)
			return
		}
		fmt.Fprint(w, `[]`)
	}))
	defer srv.Close()

	client := &http.Client{Transport: retry.New(nil, githubretry.Options()...)}
	resp, err := client.Get(srv.URL + "/user/repos")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", n.Load(), "attempts")
	// Output: 200 OK after 2 attempts
}
