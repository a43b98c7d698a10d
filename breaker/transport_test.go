package breaker

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
)

// servers starts h over HTTP/1.1, h2c and TLS HTTP/2, each with a client
// transport that speaks it.
func servers(t *testing.T, h http.Handler) map[string]struct {
	url  string
	base http.RoundTripper
} {
	t.Helper()
	out := map[string]struct {
		url  string
		base http.RoundTripper
	}{}
	h1 := httptest.NewServer(h)
	t.Cleanup(h1.Close)
	out["HTTP1"] = struct {
		url  string
		base http.RoundTripper
	}{h1.URL, &http.Transport{}}

	h2c := httptest.NewUnstartedServer(h)
	var ps http.Protocols
	ps.SetUnencryptedHTTP2(true)
	h2c.Config.Protocols = &ps
	h2c.Start()
	t.Cleanup(h2c.Close)
	out["h2c"] = struct {
		url  string
		base http.RoundTripper
	}{h2c.URL, &http.Transport{Protocols: &ps}}

	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	out["h2TLS"] = struct {
		url  string
		base http.RoundTripper
	}{tlsSrv.URL, tlsSrv.Client().Transport}
	for _, s := range out {
		if tr, ok := s.base.(*http.Transport); ok {
			t.Cleanup(tr.CloseIdleConnections)
		}
	}
	return out
}

// Through a Transport: failures open the circuit mid-call (the retry is
// refused, the last answer returned), then calls fail at once without
// reaching the server, their bodies closed; after OpenFor a probe that
// succeeds closes it.
func TestThroughTheTransport(t *testing.T) {
	var hits atomic.Int32
	var healthy atomic.Bool
	for name, s := range servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		if !healthy.Load() {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})) {
		t.Run(name, func(t *testing.T) {
			hits.Store(0)
			healthy.Store(false)
			br, clk := newBreaker(&Breaker{Failures: 3})
			rt := retry.New(s.base, retry.WithBreaker(br), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant{}))
			get := func() (*http.Response, error) {
				req, err := http.NewRequest(http.MethodGet, s.url, nil)
				if err != nil {
					t.Fatal(err)
				}
				return rt.RoundTrip(req)
			}
			for call := 1; call <= 2; call++ {
				resp, err := get()
				if err != nil {
					t.Fatalf("call %d: %v", call, err)
				}
				resp.Body.Close()
				e, _ := retry.EndingOf(resp)
				if call == 2 && (e.Reason != retry.StopBreaker || !e.RetryAt.Equal(epoch.Add(defaultOpenFor))) {
					t.Errorf("call 2 ended %+v; want the retry refused by the open circuit", e)
				}
			}
			if n := hits.Load(); n != 3 {
				t.Fatalf("the server saw %d attempts; want 3 (2, then 1 before the circuit opened)", n)
			}

			body := &closeCounter{Reader: strings.NewReader("payload")}
			req, _ := http.NewRequest(http.MethodPost, s.url, body)
			_, err := rt.RoundTrip(req)
			var re *retry.Error
			if !errors.As(err, &re) || re.Reason != retry.StopBreaker || re.Attempts != 0 || !errors.Is(err, retry.ErrCircuitOpen) {
				t.Fatalf("a call on an open circuit: %v; want a StopBreaker error after 0 attempts", err)
			}
			if at, ok := retry.RetryAt(nil, err); !ok || !at.Equal(epoch.Add(defaultOpenFor)) {
				t.Errorf("RetryAt = %v, %v", at, ok)
			}
			if hits.Load() != 3 || body.closes.Load() != 1 {
				t.Errorf("server saw %d attempts, body closed %d times; want 3 and 1", hits.Load(), body.closes.Load())
			}

			healthy.Store(true)
			clk.advance(defaultOpenFor)
			resp, err := get()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("probe: %v, %v", resp, err)
			}
			resp.Body.Close()
			if st := br.State(strings.TrimPrefix(strings.TrimPrefix(s.url, "https://"), "http://")); st != Closed {
				t.Errorf("after the probe: %v", st)
			}
		})
	}
}

type closeCounter struct {
	io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return nil
}

// Hedged calls whose first attempts stall until cancelled leave the
// circuit closed: a copy that lost the race is neither a failure nor a
// success, however many there are, over every protocol.
func TestHedgeLosersAreNoFailures(t *testing.T) {
	for name, s := range servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Attempt") == "1" {
			<-r.Context().Done() // stalls until the copy's answer cancels it
			return
		}
		w.WriteHeader(http.StatusOK)
	})) {
		t.Run(name, func(t *testing.T) {
			var changes atomic.Int32
			br, _ := newBreaker(&Breaker{Failures: 2, OnStateChange: func(string, State, State) { changes.Add(1) }})
			rt := retry.New(s.base, retry.WithBreaker(br), retry.WithAttemptHeader("X-Attempt"),
				retry.WithHedge(retry.Hedge{Delay: time.Second}), retry.WithClock(retrytest.NewClock(time.Now())))
			for range 20 {
				req, _ := http.NewRequest("GET", s.url, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if n := changes.Load(); n != 0 {
				t.Errorf("%d state changes; want the circuit closed throughout", n)
			}
			if st := br.State(strings.TrimPrefix(strings.TrimPrefix(s.url, "http://"), "https://")); st != Closed {
				t.Errorf("state %v; want closed", st)
			}
		})
	}
}

// The Transport's Key keys a Breaker without one: two hosts of one tenant
// share a circuit, and a request's own key (WithKey among its options)
// puts it in another. Over every protocol.
func TestTransportKey(t *testing.T) {
	var downHits, upHits atomic.Int32
	down := servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downHits.Add(1)
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	up := servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upHits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	tenant := func(*http.Request) string { return "tenant" }
	for name, d := range down {
		t.Run(name, func(t *testing.T) {
			downHits.Store(0)
			upHits.Store(0)
			br, _ := newBreaker(&Breaker{Failures: 2})
			rt := retry.New(d.base, retry.WithBreaker(br), retry.WithMaxAttempts(1), retry.WithKey(tenant))
			// One base reaches both servers: they speak the same protocol,
			// and httptest's TLS servers share one certificate.
			send := func(ctx context.Context, url string) (*http.Response, error) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				return rt.RoundTrip(req)
			}
			for range 2 {
				resp, err := send(context.Background(), d.url)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if st := br.State("tenant"); st != Open {
				t.Fatalf("the tenant's circuit is %v; want open", st)
			}
			_, err := send(context.Background(), up[name].url)
			if !errors.Is(err, retry.ErrCircuitOpen) || upHits.Load() != 0 {
				t.Fatalf("another host of the tenant: %v, %d hits; want refused unsent", err, upHits.Load())
			}
			own := retry.ContextWithOptions(context.Background(), retry.WithKey(func(r *http.Request) string { return r.URL.Host }))
			resp, err := send(own, up[name].url)
			if err != nil {
				t.Fatalf("a request keyed by its host: %v", err)
			}
			resp.Body.Close()
			if downHits.Load() != 2 || upHits.Load() != 1 {
				t.Errorf("hits %d and %d; want 2 and 1", downHits.Load(), upHits.Load())
			}
		})
	}
}

// A dependency that is down behind a balancer answers 503 with no wait:
// its circuit opens, and the server sees Failures attempts, not one per
// call. A rate limit's refusals, a 429 or a 503 with Retry-After, leave
// the circuit closed: every call reaches the server. Over every protocol.
func TestUnavailableWithoutWaitOpens(t *testing.T) {
	cases := []struct {
		name   string
		status int
		header http.Header
		hits   int32
	}{
		{"503 without a wait", http.StatusServiceUnavailable, nil, 3},
		{"503 with Retry-After", http.StatusServiceUnavailable, http.Header{"Retry-After": {"1"}}, 10},
		{"429", http.StatusTooManyRequests, nil, 10},
	}
	for _, c := range cases {
		var hits atomic.Int32
		for name, s := range servers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			for k, v := range c.header {
				w.Header()[k] = v
			}
			w.WriteHeader(c.status)
		})) {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				hits.Store(0)
				br, _ := newBreaker(&Breaker{Failures: 3})
				rt := retry.New(s.base, retry.WithBreaker(br), retry.WithMaxAttempts(1), retry.WithPacer(retry.NoPacer))
				for range 10 {
					req, _ := http.NewRequest(http.MethodGet, s.url, nil)
					resp, err := rt.RoundTrip(req)
					if err == nil {
						resp.Body.Close()
					} else if !errors.Is(err, retry.ErrCircuitOpen) {
						t.Fatal(err)
					}
				}
				if n := hits.Load(); n != c.hits {
					t.Errorf("the server saw %d attempts of 10 calls; want %d", n, c.hits)
				}
			})
		}
	}
}
