// Command github runs the go-github client (github.com/google/go-github)
// through a retry.Transport set up with githubretry.Options, against a fake
// GitHub REST API on loopback that enforces a primary rate limit (a few
// requests a second, answered 403 with X-RateLimit-Remaining: 0 and the
// reset's Unix time, as GitHub does) and, on issue creation, a secondary
// limit (403 with Retry-After). It prints each call and what it took:
//
//	cd examples/github && go run .
//
// The defaults of DefaultClassifier would return every one of those 403s
// at once, as permanent; with githubretry they are waited out, and only a
// real 403 (bad credentials) fails at once. The quota the API publishes
// on every answer is spread by the Transport's Pacer, so calls in a row
// do not meet the primary limit at all.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/githubretry"
	"github.com/google/go-github/v75/github"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "github:", err)
		os.Exit(1)
	}
}

// newClient returns a go-github client for the API at base whose
// transport retries as GitHub's rate limits ask, and reports each call to
// done.
func newClient(base string, done func(retry.Summary)) (*github.Client, *retry.Transport, error) {
	rt := retry.New(nil, append(githubretry.Options(),
		// Enough attempts to wait for a reset or two, and no wait past
		// the caller's deadline (the Transport refuses those by itself).
		retry.WithMaxAttempts(6),
		retry.WithOnDone(done),
	)...)
	client := github.NewClient(&http.Client{Transport: rt})
	// go-github refuses, without sending them, the requests that follow a
	// response whose quota was spent, until the reset: the Transport
	// waits for the reset instead (or returns at once a reset too far
	// away), so the client's own check is off.
	client.DisableRateLimitCheck = true
	u, err := url.Parse(base + "/")
	if err != nil {
		return nil, nil, err
	}
	client.BaseURL = u
	return client, rt, nil
}

func run(out io.Writer) error {
	api := newFakeAPI(3) // 3 requests a second
	srv := httptest.NewServer(api)
	defer srv.Close()

	var last retry.Summary
	client, rt, err := newClient(srv.URL, func(s retry.Summary) { last = s })
	if err != nil {
		return err
	}
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	report := func(what string, err error) {
		status := "ok"
		if err != nil {
			status = err.Error()
		}
		fmt.Fprintf(out, "%-28s %d attempts, waited %4.1fs: %s\n", what, last.Attempts, last.Wait.Seconds(), status)
	}
	for i := 1; i <= 8; i++ {
		_, _, err := client.Repositories.ListByAuthenticatedUser(ctx, nil)
		report(fmt.Sprintf("list repositories #%d", i), err)
	}
	for i := 1; i <= 2; i++ {
		_, _, err := client.Issues.Create(ctx, "octo", "demo", &github.IssueRequest{Title: github.Ptr(fmt.Sprintf("issue %d", i))})
		report(fmt.Sprintf("create issue #%d", i), err)
	}
	api.denyAll()
	_, _, err = client.Repositories.ListByAuthenticatedUser(ctx, nil)
	var ghErr *github.ErrorResponse
	if !errors.As(err, &ghErr) || ghErr.Response.StatusCode != http.StatusForbidden {
		return fmt.Errorf("bad credentials: got %v; want a 403 ErrorResponse", err)
	}
	report("bad credentials", err)
	fmt.Fprintf(out, "server: %d requests, %d refused for the rate limits, %d issues created\n",
		api.requests.Load(), api.limited.Load(), api.issues.Load())
	return nil
}
