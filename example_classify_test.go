package retry_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/backoff-jitter/retry"
)

// busyConflict is all an API-specific classifier needs to say: this API answers
// 409 Conflict with a "busy" error code when a previous change to the same
// resource is still being applied, which is throttling, not a conflict.
// Everything else it leaves Undecided, to DefaultClassifier.
func busyConflict(o retry.Outcome) retry.Class {
	if o.Response == nil || o.Response.StatusCode != http.StatusConflict {
		return retry.Undecided
	}
	prefix, _ := retry.PeekBody(o.Response, 1024)
	if bytes.Contains(prefix, []byte(`"code":"busy"`)) {
		return retry.Throttled
	}
	return retry.Undecided
}

func ExampleClassifier() {
	// An API that is busy twice, then applies the change.
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"code":"busy"}`)
			return
		}
		fmt.Fprint(w, "applied")
	}))
	defer srv.Close()

	client := &http.Client{Transport: retry.New(nil,
		retry.WithClassifier(busyConflict),  // the API's special case; DefaultClassifier does the rest
		retry.WithBackoff(retry.Constant{}), // no wait, for the example
	)}
	defer client.CloseIdleConnections()

	// Throttled is retried for every method, POST included.
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"name":"www"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "attempts")
	// Output: 200 applied after 3 attempts
}

func ExampleChain() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/busy":
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"code":"busy"}`)
		case "/conflict":
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"code":"version_mismatch"}`)
		case "/missing":
			http.NotFound(w, r)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "try later")
		}
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	// The Transport asks DefaultClassifier whenever its classifier says
	// Undecided, so retry.WithClassifier(busyConflict) is all a client needs;
	// Chain spells the same fallback out.
	classify := retry.Chain(busyConflict, retry.DefaultClassifier)

	for _, path := range []string{"/busy", "/conflict", "/missing", "/unavailable"} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		class := classify(retry.Outcome{Request: req, Response: resp, Attempt: 1})
		body, _ := io.ReadAll(resp.Body) // the classifier's peek is put back
		resp.Body.Close()
		fmt.Printf("%-12s %d %-9v %s\n", path, resp.StatusCode, class, bytes.TrimSpace(body))
	}
	// Output:
	// /busy        409 throttled {"code":"busy"}
	// /conflict    409 permanent {"code":"version_mismatch"}
	// /missing     404 permanent 404 page not found
	// /unavailable 503 throttled try later
}

func ExampleDefaultClassifier() {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	for _, code := range []int{200, 304, 400, 404, 408, 429, 500, 501, 502, 503} {
		o := retry.Outcome{Request: req, Response: &http.Response{StatusCode: code}, Attempt: 1}
		fmt.Println(code, retry.DefaultClassifier(o))
	}
	// Output:
	// 200 success
	// 304 success
	// 400 permanent
	// 404 permanent
	// 408 transient
	// 429 throttled
	// 500 transient
	// 501 permanent
	// 502 transient
	// 503 throttled
}

func ExamplePeekBody() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `<Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error>`)
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()

	prefix, err := retry.PeekBody(resp, 20)
	fmt.Printf("peeked: %s %v\n", prefix, err)
	body, err := io.ReadAll(resp.Body)
	fmt.Printf("read:   %s %v\n", body, err)
	// Output:
	// peeked: <Error><Code>Throttl <nil>
	// read:   <Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error> <nil>
}

func ExampleReplaySafe() {
	get, _ := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
	post, _ := http.NewRequest(http.MethodPost, "https://api.example.com/items", nil)
	keyed, _ := http.NewRequest(http.MethodPost, "https://api.example.com/items", nil)
	keyed.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")

	fmt.Println(retry.ReplaySafe(get), retry.ReplaySafe(post), retry.ReplaySafe(keyed))
	// Output: true false true
}
