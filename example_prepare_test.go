package retry_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/backoff-jitter/retry"
)

// tokenSource hands out a bearer token and makes a new one when told the
// current one was refused.
type tokenSource struct {
	mu      sync.Mutex
	token   string
	refresh int
}

func (s *tokenSource) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// refused makes a new token unless another attempt already replaced the
// refused one.
func (s *tokenSource) refused(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == token {
		s.refresh++
		s.token = fmt.Sprintf("token-%d", s.refresh)
	}
}

// BeforeAttempt sets each attempt's credentials: here a bearer token,
// refreshed after the server refuses it with a 401, and the request sent
// once more. A 401 is permanent by default; the classifier makes it
// retryable after the first attempt only, so that a refreshed token that
// is refused too fails the call instead of looping.
func ExampleWithBeforeAttempt() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token-1" {
			http.Error(w, "expired token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()

	tokens := &tokenSource{token: "token-0"} // expired, as the server says
	rt := retry.New(nil,
		retry.WithClassifier(func(o retry.Outcome) retry.Class {
			if o.Response != nil && o.Response.StatusCode == http.StatusUnauthorized && o.Attempt == 1 {
				// Refused before the server did anything: safe to send
				// again, whatever the method.
				return retry.Unsent
			}
			return retry.Undecided
		}),
		retry.WithBeforeAttempt(func(p retry.Prepare) error {
			if p.Previous != nil && p.Previous.Response != nil && p.Previous.Response.StatusCode == http.StatusUnauthorized {
				tokens.refused(strings.TrimPrefix(p.Previous.Request.Header.Get("Authorization"), "Bearer "))
			}
			p.Request.Header.Set("Authorization", "Bearer "+tokens.current())
			return nil
		}),
	)
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "with", tokens.current())
	// Output: 200 OK with token-1
}
