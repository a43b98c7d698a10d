package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// Headers the client sends with every request, for the recorder.
const (
	headerID  = "X-Request-Id"  // unique per logical request, the same on every attempt
	headerSum = "X-Body-Sha256" // hex SHA-256 of the body the caller meant to send
)

// recorder is a loopback server that executes requests: it reads each body
// whole, and only when that succeeds counts an execution of the request's
// id and checks the body against the hash the client announced. A body
// cut short by a fault is not executed, as a real server would reject it.
type recorder struct {
	srv *httptest.Server

	mu        sync.Mutex
	execs     map[string]int
	corrupted []string     // ids whose executed body did not hash to the original
	truncated int          // bodies the server could not read whole
	conns     atomic.Int64 // connections accepted
	open      atomic.Int64 // connections not yet closed

	// closeEach makes the server close every connection after its response.
	closeEach bool
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{execs: make(map[string]int)}
	rec.srv = httptest.NewUnstartedServer(http.HandlerFunc(rec.serve))
	rec.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			rec.conns.Add(1)
			rec.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			rec.open.Add(-1)
		}
	}
	// A cut connection makes the server log; the tests print nothing.
	rec.srv.Config.ErrorLog = discardLog
	rec.srv.Start()
	return rec
}

// responseBody is what the recorder answers an executed request with: big
// enough to take several reads and packets, and checked by the client.
var responseBody = bytes.Repeat([]byte("response body, checked by the client. "), 64)

func (rec *recorder) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rec.mu.Lock()
		rec.truncated++
		rec.mu.Unlock()
		return // the connection is broken; nothing was executed
	}
	id := r.Header.Get(headerID)
	sum := sha256.Sum256(body)
	rec.mu.Lock()
	rec.execs[id]++
	if hex.EncodeToString(sum[:]) != r.Header.Get(headerSum) {
		rec.corrupted = append(rec.corrupted, id)
	}
	rec.mu.Unlock()
	if rec.closeEach {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(responseBody)))
	w.WriteHeader(http.StatusOK)
	w.Write(responseBody)
}

// waitClosed waits, up to timeout, until the server has no connection
// open, and reports whether it got there.
//
// Before a toxiproxy is stopped, its links must have drained: a toxic
// still holding data when Stop closes the upstream connection blocks
// forever on a channel no one reads (toxiproxy v2.5.0's link.write returns
// on a write error without draining its toxics' output), leaking its
// goroutine. Once the server saw every connection closed, every link has
// delivered all it had.
func (rec *recorder) waitClosed(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for rec.open.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// kind is a kind of request the load sends.
type kind struct {
	name   string
	method string
	key    bool // sends an Idempotency-Key
	body   int  // body size; 0 for none
	opaque bool // hide the body's type so the Transport buffers it (no GetBody)
}

// safe reports whether the Transport may replay the request after a
// transient outcome.
func (k kind) safe() bool {
	return k.key || k.method == http.MethodGet || k.method == http.MethodPut
}

var kinds = []kind{
	{name: "GET", method: http.MethodGet},
	{name: "PUT buffered", method: http.MethodPut, body: 8 << 10, opaque: true},
	{name: "PUT GetBody", method: http.MethodPut, body: 8 << 10},
	{name: "POST key", method: http.MethodPost, key: true, body: 8 << 10, opaque: true},
	{name: "POST", method: http.MethodPost, body: 8 << 10, opaque: true},
	{name: "PATCH", method: http.MethodPatch, body: 2 << 10},
}

// opaqueReader hides every method of its reader but Read, so net/http
// cannot set GetBody for it.
type opaqueReader struct{ r io.Reader }

func (o *opaqueReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// closeCounter counts Close calls on a request body. It lets go of its
// reader when closed, so that a test keeping it to count closes later
// does not keep the body's bytes too.
type closeCounter struct {
	mu     sync.Mutex
	r      io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r == nil {
		return 0, errors.New("read after Close")
	}
	return c.r.Read(p)
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	c.mu.Lock()
	c.r = nil
	c.mu.Unlock()
	return nil
}

// result is how one logical request ended.
type result struct {
	id      string
	kind    kind
	ok      bool          // 2xx with the whole, intact response body
	reason  string        // why it failed: a StopReason, or what went wrong
	body    *closeCounter // the caller's body, when the Transport buffers it
	gaveUp  bool          // OnGiveUp was called
	elapsed time.Duration
}

// load sends requests through one Transport and tallies the outcomes.
type load struct {
	rt     *retry.Transport
	client *http.Client
	url    string

	mu      sync.Mutex
	reasons map[string]string // request id -> OnGiveUp reason
	retries atomic.Int64      // attempts that failed and were retried
	gaveUps atomic.Int64      // attempts that failed and ended a request
}

// newLoad returns a load whose Transport sends to url with the options the
// fault tests share (small real backoff, a short MaxRetryAfter) and opts.
func newLoad(url string, opts ...retry.Option) *load {
	l := &load{url: url, reasons: make(map[string]string)}
	base := []retry.Option{
		retry.WithMaxAttempts(10),
		retry.WithBackoff(retry.Exponential{Base: time.Millisecond, Cap: 20 * time.Millisecond, Jitter: retry.FullJitter}),
		retry.WithMaxRetryAfter(100 * time.Millisecond),
		retry.WithOnRetry(func(retry.Event) { l.retries.Add(1) }),
		retry.WithOnGiveUp(func(e retry.Event) {
			l.gaveUps.Add(1)
			l.mu.Lock()
			l.reasons[e.Request.Header.Get(headerID)] = e.Reason.String()
			l.mu.Unlock()
		}),
	}
	l.rt = retry.New(nil, append(base, opts...)...)
	l.client = &http.Client{Transport: l.rt}
	return l
}

var idSeq atomic.Int64

// do sends one request of kind k and reports how it ended.
func (l *load) do(ctx context.Context, k kind) result {
	id := fmt.Sprintf("%s-%d", k.name, idSeq.Add(1))
	payload := make([]byte, k.body)
	for i := range payload {
		payload[i] = byte(rand.Uint32())
	}
	sum := sha256.Sum256(payload)
	var body io.Reader
	var cc *closeCounter
	if k.body > 0 {
		if k.opaque {
			cc = &closeCounter{r: &opaqueReader{bytes.NewReader(payload)}}
			body = cc
		} else {
			body = bytes.NewReader(payload)
		}
	}
	req, err := http.NewRequestWithContext(ctx, k.method, l.url+"/"+id, body)
	if err != nil {
		panic(err)
	}
	req.Header.Set(headerID, id)
	req.Header.Set(headerSum, hex.EncodeToString(sum[:]))
	if k.key {
		req.Header.Set("Idempotency-Key", id)
	}
	r := result{id: id, kind: k, body: cc}
	start := time.Now()
	resp, err := l.client.Do(req)
	r.elapsed = time.Since(start)
	l.mu.Lock()
	reason, gaveUp := l.reasons[id]
	delete(l.reasons, id)
	l.mu.Unlock()
	r.gaveUp = gaveUp
	if err != nil {
		var re *retry.Error
		if errors.As(err, &re) {
			r.reason = re.Reason.String()
		} else {
			r.reason = "error without a reason: " + err.Error()
		}
		return r
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode/100 != 2:
		r.reason = fmt.Sprintf("status %d (%s)", resp.StatusCode, reason)
	case err != nil:
		r.reason = "reading the response body: " + err.Error()
	case !bytes.Equal(got, responseBody):
		r.reason = "corrupted response body"
	default:
		r.ok = true
	}
	return r
}

// run sends n requests of each kind, workers at a time, and returns the
// results. Every request is bounded by timeout.
func (l *load) run(n, workers int, timeout time.Duration) []result {
	jobs := make(chan kind)
	out := make(chan result)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				out <- l.do(ctx, k)
				cancel()
			}
		})
	}
	go func() {
		for range n {
			for _, k := range kinds {
				jobs <- k
			}
		}
		close(jobs)
		wg.Wait()
		close(out)
	}()
	var results []result
	for r := range out {
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].id < results[j].id })
	return results
}
