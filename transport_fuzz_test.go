package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fuzzStatuses and fuzzRetryAfters are what a fuzzed step picks from.
var (
	fuzzStatuses    = []int{200, 204, 301, 304, 400, 404, 408, 429, 500, 501, 502, 503, 504, 505, 599, 600, 99}
	fuzzRetryAfters = []string{"0", "1", "7", "-1", "1.5", "soon", "", "301", "99999999999999999999",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 PST"}
)

// fuzzStep is what the in-memory base transport does on one attempt.
type fuzzStep struct {
	kind uint8 // see fuzzBase.RoundTrip
	arg  uint8 // status or Retry-After index
	read uint8 // how much of the body the base reads: 0 none, 255 all, else that many bytes
}

func decodeSteps(script []byte) []fuzzStep {
	var steps []fuzzStep
	for i := 0; i+2 < len(script) && len(steps) < 64; i += 3 {
		steps = append(steps, fuzzStep{kind: script[i] % 8, arg: script[i+1], read: script[i+2]})
	}
	return steps
}

// trackedBody is a response body that records whether it was closed.
type trackedBody struct {
	io.Reader
	closed atomic.Int32
}

func (b *trackedBody) Close() error { b.closed.Add(1); return nil }

// tracked is a response a fuzz base answered with, and its own body: a
// response the Transport discards and keeps in memory while the retry
// waits (see gates) has its Body replaced by the copy.
type tracked struct {
	resp *http.Response
	body *trackedBody
}

// checkClosed checks that the body of every response but returned was
// closed once; returned's not at all, or, if it was kept in memory, its
// original once.
func checkClosed(t *testing.T, all []tracked, returned *http.Response) {
	t.Helper()
	for i, r := range all {
		closed := r.body.closed.Load()
		body := r.resp.Body
		if c, ok := body.(*cancelOnClose); ok {
			body = c.ReadCloser // the attempt's context, kept until Close
		}
		kept := body != io.ReadCloser(r.body)
		switch {
		case r.resp == returned && kept && closed != 1:
			t.Errorf("the returned response, kept in memory, closed its original body %d times; want 1", closed)
		case r.resp == returned && !kept && closed != 0:
			t.Errorf("the returned response's body was closed")
		case r.resp != returned && closed != 1:
			t.Errorf("discarded response %d closed %d times; want 1", i+1, closed)
		}
	}
}

// fuzzBase is an in-memory http.RoundTripper that plays a script of
// statuses, Retry-After values and errors, reads as much of each attempt's
// body as its step says, reports the write progress through httptrace as
// net/http would, and checks that every attempt's body bytes are the
// caller's.
type fuzzBase struct {
	t        *testing.T
	steps    []fuzzStep
	payload  []byte // the caller's body bytes (before a read error, if any)
	safe     bool
	cancel   context.CancelFunc
	cancelAt int

	calls      int
	responses  []tracked
	retryAfter []string // each attempt's Retry-After; "" for none or an error
	unsafeEnd  bool     // the last step was transient for an unsafe request
}

func (b *fuzzBase) step(n int) fuzzStep {
	if n-1 < len(b.steps) {
		return b.steps[n-1]
	}
	return fuzzStep{kind: 0, arg: 0, read: 255} // the script ran out: 200
}

func (b *fuzzBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.calls++
	b.retryAfter = append(b.retryAfter, "")
	if b.unsafeEnd {
		b.t.Errorf("attempt %d of an unsafe request after a transient outcome", b.calls)
	}
	st := b.step(b.calls)
	trace := httptrace.ContextClientTrace(r.Context())
	if trace != nil && trace.GetConn != nil {
		trace.GetConn(r.URL.Host)
	}
	wrote := st.kind != 1 && st.kind != 2 // kinds 1 and 2 fail before writing
	var got []byte
	var readErr error
	if r.Body != nil {
		if wrote {
			limit := int64(st.read)
			if st.read == 255 {
				limit = 1 << 30
			}
			got, readErr = io.ReadAll(io.LimitReader(r.Body, limit))
		}
		r.Body.Close() // a RoundTripper closes the body, also on errors
	}
	if !bytes.HasPrefix(b.payload, got) {
		b.t.Errorf("attempt %d sent %q; want a prefix of %q", b.calls, got, b.payload)
	}
	if wrote && st.read == 255 && readErr == nil && r.Body != nil && !bytes.Equal(got, b.payload) {
		b.t.Errorf("attempt %d sent %d bytes to EOF; want all %d", b.calls, len(got), len(b.payload))
	}
	if wrote && trace != nil {
		if trace.WroteHeaders != nil {
			trace.WroteHeaders()
		}
		if trace.WroteRequest != nil && readErr == nil && (st.read == 255 || r.Body == nil) {
			trace.WroteRequest(httptrace.WroteRequestInfo{})
		}
	}
	if b.cancelAt == b.calls {
		b.cancel()
		return nil, context.Canceled
	}
	if readErr != nil {
		b.unsafeEnd = !b.safe
		return nil, fmt.Errorf("fuzz: reading the request body: %w", readErr)
	}
	switch st.kind {
	case 1: // dial refused: unsent
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case 2: // nothing written, an untyped error: unsent
		return nil, errors.New("fuzz: connection lost before the request was written")
	case 3: // a reset after writing: transient
		b.unsafeEnd = !b.safe
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	case 4: // an early EOF after writing: transient
		b.unsafeEnd = !b.safe
		return nil, io.ErrUnexpectedEOF
	case 5: // a response with a Retry-After
		return b.respond(r, 503, fuzzRetryAfters[int(st.arg)%len(fuzzRetryAfters)]), nil
	case 6: // a response of any status, with a Retry-After of 1
		code := fuzzStatuses[int(st.arg)%len(fuzzStatuses)]
		switch code {
		case 408, 500, 502, 504, 599:
			b.unsafeEnd = !b.safe
		}
		return b.respond(r, code, "1"), nil
	case 7: // a timeout after writing: transient
		b.unsafeEnd = !b.safe
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: fuzzTimeout{}}
	}
	return b.respond(r, 200, ""), nil
}

func (b *fuzzBase) respond(r *http.Request, code int, retryAfter string) *http.Response {
	h := make(http.Header)
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	b.retryAfter[b.calls-1] = retryAfter
	body := &trackedBody{Reader: bytes.NewReader(fmt.Appendf(nil, "attempt %d", b.calls))}
	resp := &http.Response{StatusCode: code, Header: h, Request: r, Body: body}
	b.responses = append(b.responses, tracked{resp, body})
	return resp
}

type fuzzTimeout struct{}

func (fuzzTimeout) Error() string   { return "fuzz: i/o timeout" }
func (fuzzTimeout) Timeout() bool   { return true }
func (fuzzTimeout) Temporary() bool { return true }

// errAfterReader yields r's bytes, then err instead of EOF.
type errAfterReader struct {
	r   io.Reader
	err error
}

func (e *errAfterReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

var errFuzzBody = errors.New("fuzz: the caller's body failed")

// FuzzTransport drives the Transport with a fuzzed script of outcomes from
// an in-memory base transport (statuses, Retry-After values, errors of
// each class, written or not, and how much of the body each attempt reads),
// with a fuzzed method, Idempotency-Key, body kind and size, MaxAttempts
// and MaxBufferedBody, on a fake clock. Invariants:
//
//   - no more attempts than MaxAttempts;
//   - no attempt of an unsafe request after a transient outcome;
//   - every attempt's body bytes are a prefix of the caller's, all of
//     them when read to the end;
//   - the caller's body is closed exactly once;
//   - exactly one of the response and the error is nil; a response is the
//     last attempt's, unclosed, and every other response was closed; an
//     error is a *Error whose Attempts counts the attempts made;
//   - OnRetry is called once per retry with a retryable class, and the
//     clock slept once per retry, never less than a valid Retry-After;
//   - a request whose context was canceled makes no further attempt.
func FuzzTransport(f *testing.F) {
	// script: triples (kind, arg, read); see fuzzBase.RoundTrip.
	f.Add([]byte{5, 0, 255, 6, 7, 255, 0, 0, 255}, uint8(0), false, uint8(3), uint16(100), uint16(0), uint8(0), uint8(0))
	f.Add([]byte{3, 0, 255, 4, 0, 10}, uint8(1), false, uint8(3), uint16(1000), uint16(0), uint8(5), uint8(0))
	f.Add([]byte{3, 0, 255, 7, 0, 10}, uint8(1), true, uint8(4), uint16(1000), uint16(16), uint8(5), uint8(0))
	f.Add([]byte{1, 0, 0, 2, 0, 0, 6, 9, 3, 6, 11, 255}, uint8(1), false, uint8(3), uint16(5000), uint16(64), uint8(9), uint8(0))
	f.Add([]byte{5, 8, 20, 5, 9, 255}, uint8(2), false, uint8(2), uint16(300), uint16(0), uint8(3), uint8(2))
	f.Add([]byte{6, 8, 255, 6, 8, 255}, uint8(0), false, uint8(5), uint16(300), uint16(0), uint8(3), uint8(0))
	f.Add([]byte{5, 3, 1, 5, 4, 255}, uint8(3), false, uint8(6), uint16(300), uint16(0), uint8(4), uint8(0))
	f.Add([]byte{}, uint8(0), false, uint8(0), uint16(0), uint16(0), uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, script []byte, methodIdx uint8, key bool, bodyKind uint8, bodySize, maxBuf uint16, maxAttempts, cancelAt uint8) {
		methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", ""}
		method := methods[int(methodIdx)%len(methods)]
		steps := decodeSteps(script)
		payload := make([]byte, int(bodySize)%20000)
		for i := range payload {
			payload[i] = byte(i*7 + 3)
		}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://fuzz.invalid/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		var caller *countingCloser
		getBodyCalls := 0
		switch bodyKind % 7 {
		case 0: // no body
		case 1:
			req.Body = http.NoBody
		case 2: // a body with GetBody, as http.NewRequest makes for a bytes.Reader
			caller = &countingCloser{Reader: bytes.NewReader(payload)}
			req.Body, req.ContentLength = caller, int64(len(payload))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }
		case 3: // an opaque body of unknown length: buffered for replay
			caller = &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
			req.Body, req.ContentLength = caller, -1
		case 4: // an opaque body of known length
			caller = &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
			req.Body, req.ContentLength = caller, int64(len(payload))
		case 5: // an opaque body that fails after its bytes
			caller = &countingCloser{Reader: &errAfterReader{&opaqueReader{bytes.NewReader(payload)}, errFuzzBody}}
			req.Body, req.ContentLength = caller, -1
		case 6: // GetBody that fails from its second call on
			caller = &countingCloser{Reader: bytes.NewReader(payload)}
			req.Body, req.ContentLength = caller, int64(len(payload))
			req.GetBody = func() (io.ReadCloser, error) {
				if getBodyCalls++; getBodyCalls > 1 {
					return nil, errors.New("fuzz: GetBody failed")
				}
				return io.NopCloser(bytes.NewReader(payload)), nil
			}
		}
		if key {
			req.Header.Set("Idempotency-Key", "fuzz")
		}
		safe := ReplaySafe(req)

		base := &fuzzBase{t: t, steps: steps, payload: payload, safe: safe, cancel: cancel, cancelAt: int(cancelAt % 8)}
		if req.Body == nil || req.Body == http.NoBody {
			base.payload = nil
		}
		var retries []Event
		attempts := int(maxAttempts % 10)
		rt, clock := testTransport(base,
			WithMaxAttempts(attempts),
			WithMaxBufferedBody(int64(maxBuf)),
			WithBudget(NoBudget),
			WithOnRetry(func(e Event) { retries = append(retries, e) }),
		)
		if attempts == 0 {
			attempts = DefaultMaxAttempts
		}
		resp, err := rt.RoundTrip(req)

		if base.calls > attempts {
			t.Errorf("%d attempts; MaxAttempts is %d", base.calls, attempts)
		}
		if base.cancelAt > 0 && base.calls > base.cancelAt {
			t.Errorf("attempt %d after the context was canceled during attempt %d", base.calls, base.cancelAt)
		}
		switch {
		case (resp == nil) == (err == nil):
			t.Fatalf("RoundTrip = %v, %v; want exactly one nil", resp, err)
		case err != nil:
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("RoundTrip error %T %v; want a *Error", err, err)
			}
			if re.Attempts != base.calls {
				t.Errorf("*Error.Attempts = %d; the base saw %d", re.Attempts, base.calls)
			}
			checkClosed(t, base.responses, nil)
		default:
			if last := base.responses[len(base.responses)-1].resp; resp != last {
				t.Errorf("RoundTrip returned a response that is not the last attempt's")
			}
			if resp.Body == nil {
				t.Errorf("response without a body")
			}
			checkClosed(t, base.responses, resp)
			resp.Body.Close()
		}
		if caller != nil {
			if n := caller.closes.Load(); n != 1 {
				t.Errorf("the caller's body was closed %d times; want 1", n)
			}
		}
		// GetBody failing ends the request before its attempt is made:
		// the wait before it was slept, but no attempt followed.
		waits := clock.Waits()
		if len(retries) != len(waits) {
			t.Errorf("%d OnRetry calls but %d waits", len(retries), len(waits))
		}
		if want := base.calls - 1; len(retries) != want && !(len(retries) == base.calls && getBodyCalls > 1) {
			t.Errorf("%d OnRetry calls for %d attempts", len(retries), base.calls)
		}
		for i, e := range retries {
			switch e.Class {
			case Throttled, Unsent:
			case Transient:
				if !safe {
					t.Errorf("retry %d of an unsafe request after a transient outcome", i+1)
				}
			default:
				t.Errorf("retry %d after an outcome of class %v", i+1, e.Class)
			}
			if waits[i] < 0 {
				t.Errorf("wait %d is negative: %v", i+1, waits[i])
			}
			if e.FromServer && e.Delay != waits[i] {
				t.Errorf("wait %d: slept %v; the server asked for %v", i+1, waits[i], e.Delay)
			}
			// Delay-seconds do not depend on now; the dates are far off.
			if d, ok := ParseRetryAfter(base.retryAfter[i], time.Time{}); ok && d < time.Hour && waits[i] < d {
				t.Errorf("wait %d: slept %v, less than Retry-After %v", i+1, waits[i], d)
			}
		}
	})
}
