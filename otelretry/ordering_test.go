package otelretry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/otelretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"golang.org/x/oauth2"
)

// tracedClient is a client whose calls and attempts are traced, and whose
// every attempt asks tokens for a token that is still valid.
func tracedClient(tokens oauth2.TokenSource, base http.RoundTripper) *http.Client {
	attempts := otelretry.Attempts(&oauth2.Transport{Source: tokens, Base: base})
	return &http.Client{Transport: otelhttp.NewTransport(
		retry.New(attempts, retry.WithOnRetry(otelretry.RecordRetry(nil)),
			retry.WithBackoff(retry.Constant{Base: time.Millisecond})),
	)}
}

// rotatingTokens hands out token 1 until it is revoked, then token 2.
type rotatingTokens struct {
	mu      sync.Mutex
	revoked bool
}

func (r *rotatingTokens) Token() (*oauth2.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revoked {
		return &oauth2.Token{AccessToken: "token-2", Expiry: time.Now().Add(time.Hour)}, nil
	}
	return &oauth2.Token{AccessToken: "token-1", Expiry: time.Now().Add(time.Hour)}, nil
}

// The order of the layers decides whether a retry carries a valid token.
// The server answers the first attempt 503 and revokes token 1 at once
// (it expired during the backoff): with the credentials inside the
// Transport the retry fetches token 2 and succeeds; with them outside, the
// retry replays token 1 and is refused with 401.
func TestCredentialsInsideTheTransport(t *testing.T) {
	for _, inside := range []bool{true, false} {
		tokens := &rotatingTokens{}
		var n int
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			n++
			if n == 1 {
				tokens.mu.Lock()
				tokens.revoked = true
				tokens.mu.Unlock()
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			if r.Header.Get("Authorization") != "Bearer token-2" {
				w.WriteHeader(http.StatusUnauthorized)
			}
		}))
		var client *http.Client
		base := http.DefaultTransport.(*http.Transport).Clone()
		if inside {
			client = tracedClient(tokens, base)
		} else {
			// otel(oauth2(retry)): the token is set once, above the retries.
			rt := retry.New(base, retry.WithBackoff(retry.Constant{Base: time.Millisecond}))
			client = &http.Client{Transport: otelhttp.NewTransport(&oauth2.Transport{Source: tokens, Base: rt})}
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusOK
		if !inside {
			want = http.StatusUnauthorized
		}
		if resp.StatusCode != want {
			t.Errorf("credentials inside the Transport %v: %d; want %d", inside, resp.StatusCode, want)
		}
		base.CloseIdleConnections()
		srv.Close()
	}
}
