package retry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/awsretry"
)

// A drop-in http.Client: code that takes an *http.Client needs no other
// change. A GET is retried after a 502; a POST is retried after a 503,
// which a server sends for requests it did not process, but not after a
// 500, which it may have.
func Example_httpClient() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch n := hits.Add(1); {
		case r.Method == http.MethodGet && n == 1:
			w.WriteHeader(http.StatusBadGateway)
		case r.URL.Path == "/busy" && n == 3:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/broken":
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()

	client := retry.NewClient(retry.WithBackoff(retry.Constant{Base: time.Millisecond}))
	defer client.CloseIdleConnections()
	get, _ := client.Get(srv.URL + "/items")
	busy, _ := client.Post(srv.URL+"/busy", "application/json", bytes.NewReader([]byte(`{}`)))
	broken, _ := client.Post(srv.URL+"/broken", "application/json", bytes.NewReader([]byte(`{}`)))
	for _, resp := range []*http.Response{get, busy, broken} {
		resp.Body.Close()
		fmt.Println(resp.Request.Method, resp.Request.URL.Path, resp.Status)
	}
	fmt.Println(hits.Load(), "requests reached the server")
	// Output:
	// GET /items 200 OK
	// POST /busy 200 OK
	// POST /broken 500 Internal Server Error
	// 5 requests reached the server
}

// A rate-limited API: a stand-in for Route 53, which answers the calls
// over its rate with HTTP 400 and the code Throttling. awsretry.Classify
// makes those retryable for every method, POST included; everything else
// (here, a 400 InvalidInput) is left to DefaultClassifier.
func Example_rateLimitedAPI() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		code := "Throttling"
		switch {
		case r.URL.Query().Has("bad"):
			code = "InvalidInput"
		case calls.Add(1) > 2:
			fmt.Fprint(w, `<ChangeResourceRecordSetsResponse/>`)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>...</Message></Error></ErrorResponse>`, code)
	}))
	defer srv.Close()

	rt := retry.New(nil,
		retry.WithClassifier(awsretry.Classify),
		retry.WithMaxAttempts(20),
		retry.WithBackoff(retry.Exponential{Base: time.Millisecond, Cap: 4 * time.Millisecond, Jitter: retry.EqualJitter}),
		retry.WithMaxRetryAfter(20*time.Second), // well inside a SigV4 signature's 5 minutes
		retry.WithOnRetry(func(e retry.Event) {
			fmt.Printf("  attempt %d: %d %v, retried\n", e.Attempt, e.StatusCode, e.Class)
		}),
		retry.WithOnGiveUp(func(e retry.Event) {
			fmt.Printf("  attempt %d: %d %v, %v\n", e.Attempt, e.StatusCode, e.Class, e.Reason)
		}),
	)
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt}
	for _, url := range []string{srv.URL + "/rrset", srv.URL + "/rrset?bad"} {
		// A deadline bounds the retries of each call.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`<Change/>`)))
		fmt.Println("POST", req.URL.RequestURI())
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			cancel()
			return
		}
		resp.Body.Close()
		cancel()
		fmt.Println("  =>", resp.Status)
	}
	// Output:
	// POST /rrset
	//   attempt 1: 400 throttled, retried
	//   attempt 2: 400 throttled, retried
	//   => 200 OK
	// POST /rrset?bad
	//   attempt 1: 400 permanent, not retryable
	//   => 400 Bad Request
}

// An SDK wrapper: a client library gives reads and writes their own retry
// settings over one connection pool, counts and logs the retries, bounds
// every call with a deadline, and sends each write with an
// Idempotency-Key made once for the call, so that a write whose answer was
// lost (here, a 502 from a proxy after the server acted) is replayed
// safely: the server sees the key again and does not act twice.
func Example_sdkWrapper() {
	var mu sync.Mutex
	seen := map[string]int{} // Idempotency-Key -> requests with it
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			fmt.Fprint(w, `{"id":"w1","name":"sprocket"}`)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		seen[key]++
		first := seen[key] == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusBadGateway) // acted on, but the answer was lost
			return
		}
		w.WriteHeader(http.StatusCreated) // the stored answer to the key
	}))
	defer srv.Close()

	// A text logger without times, so the output is stable.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "url" || a.Key == "delay" {
				return slog.Attr{}
			}
			return a
		},
	}))
	var retries atomic.Int64
	hooks := func(endpoint string) retry.Option {
		log := retry.SlogHook(logger.With("endpoint", endpoint), slog.LevelWarn)
		return retry.WithOnRetry(func(e retry.Event) {
			retries.Add(1)
			log(e)
		})
	}
	pool := http.DefaultTransport.(*http.Transport).Clone()
	defer pool.CloseIdleConnections()
	reads := &http.Client{Transport: retry.New(pool, hooks("read"),
		retry.WithMaxAttempts(5),
		retry.WithAttemptTimeout(2*time.Second),
	)}
	writes := &http.Client{Transport: retry.New(pool, hooks("write"),
		retry.WithMaxAttempts(4),
		retry.WithBackoff(retry.Exponential{Base: time.Millisecond, Cap: 10 * time.Millisecond, Jitter: retry.FullJitter}),
	)}
	// GetWidget, a read:
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/widgets/w1", nil)
	resp, err := reads.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("GET", resp.Status)

	// CreateWidget, a write:
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/widgets", bytes.NewReader([]byte(`{"name":"gear"}`)))
	req.Header.Set("Idempotency-Key", "3F6QPHJC2NUDX5UVOLUHMGPLFQ") // crypto/rand.Text(), once per call
	resp, err = writes.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("POST", resp.Status, "after", retries.Load(), "retry; requests per key:", seen)
	// Output:
	// GET 200 OK
	// level=WARN msg=retry endpoint=write method=POST attempt=1 class=transient status=502 from_server=false
	// POST 201 Created after 1 retry; requests per key: map[3F6QPHJC2NUDX5UVOLUHMGPLFQ:2]
}
