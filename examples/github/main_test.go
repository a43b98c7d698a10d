package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/google/go-github/v75/github"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Through go-github: the primary limit's 403s are waited out until the
// reset, a secondary limit's 403 for its Retry-After (and the refused
// POST was not executed, so the issue is created once), and a 403 that is
// no limit comes back at once as go-github's ErrorResponse.
//
// Bound: real time, the resets of one or two wall-clock seconds.
func TestGoGitHubThroughTransport(t *testing.T) {
	api := newFakeAPI(2)
	// The first 5 requests are held until all 5 have arrived, so that the
	// burst below is one at the server whatever the scheduling.
	var arrived sync.WaitGroup
	arrived.Add(5)
	var held atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if held.Add(1) <= 5 {
			arrived.Done()
			arrived.Wait()
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var mu sync.Mutex // OnDone is called from the burst's goroutines
	var done []retry.Summary
	client, rt, err := newClient(srv.URL, func(s retry.Summary) {
		mu.Lock()
		done = append(done, s)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A cold burst of 5 at once against 2 a second meets the primary
	// limit before any answer says so; the 403s are waited out.
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			_, _, err := client.Repositories.ListByAuthenticatedUser(ctx, nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("burst: %v", err)
		}
	}
	limited := api.limited.Load()
	if limited == 0 {
		t.Fatal("the burst never met the primary limit: the test proves nothing")
	}
	// Then the quota the API publishes is spread: 5 calls in a row meet
	// the limit no more.
	for i := range 5 {
		if _, _, err := client.Repositories.ListByAuthenticatedUser(ctx, nil); err != nil {
			t.Fatalf("list %d: %v", i+1, err)
		}
	}
	if n := api.limited.Load() - limited; n != 0 {
		t.Errorf("%d calls in a row met the primary limit; want the published quota spread", n)
	}
	issue, _, err := client.Issues.Create(ctx, "octo", "demo", &github.IssueRequest{Title: github.Ptr("hello")})
	if err != nil {
		t.Fatalf("create issue: %v", err)
	}
	if issue.GetNumber() != 1 || api.issues.Load() != 1 {
		t.Errorf("issue %d, %d created; want issue 1, created once", issue.GetNumber(), api.issues.Load())
	}
	last := done[len(done)-1]
	if last.Attempts < 2 || last.Class != retry.Success {
		t.Errorf("create issue: %+v; want a success after the secondary limit's 403", last)
	}

	api.denyAll()
	_, _, err = client.Repositories.ListByAuthenticatedUser(ctx, nil)
	var ghErr *github.ErrorResponse
	if !errors.As(err, &ghErr) || ghErr.Response.StatusCode != http.StatusForbidden || !strings.Contains(ghErr.Message, "Bad credentials") {
		t.Fatalf("bad credentials: %v; want go-github's 403 ErrorResponse", err)
	}
	if last := done[len(done)-1]; last.Attempts != 1 || last.Reason != retry.StopPermanent {
		t.Errorf("bad credentials: %+v; want 1 attempt, not retryable", last)
	}
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"list repositories #8", "create issue #2", "bad credentials", "2 issues created"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
