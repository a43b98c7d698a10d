package retry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hedgeBase is an in-memory base transport for FuzzHedge: attempt n reads
// all of its body, checks it is the caller's, and answers as kinds[n-1]
// says. It knows the copies from the Transport's OnHedge hook, which is
// called before a copy is sent. It is safe for concurrent use, as the
// copies of a race run at once.
type hedgeBase struct {
	t       *testing.T
	kinds   []uint8
	payload []byte
	// copyNext says whether the Transport will send a copy of attempt n,
	// the k-th of its round (0 for the round's first), so that a slow
	// attempt waits for it only when one comes.
	copyNext func(n, k int) bool

	mu        sync.Mutex
	calls     int
	inFlight  int
	k         int           // copies of the current round so far
	throttled bool          // an attempt of the current round was answered 503: no copy follows
	answered  chan struct{} // closed, and replaced, when an attempt answers
	maxFlight int
	copies    map[int]bool // the attempt numbers OnHedge reported
	responses []tracked
}

func (b *hedgeBase) onHedge(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.copies == nil {
		b.copies = make(map[int]bool)
	}
	b.copies[e.Attempt] = true
}

func (b *hedgeBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.calls++
	n := b.calls
	if b.copies[n] {
		b.k++
	} else {
		b.k, b.throttled = 0, false
	}
	if b.answered == nil {
		b.answered = make(chan struct{})
	}
	k, answered := b.k, b.answered
	b.inFlight++
	b.maxFlight = max(b.maxFlight, b.inFlight)
	kind := uint8(0)
	if n-1 < len(b.kinds) {
		kind = b.kinds[n-1] % 6
	}
	b.mu.Unlock()

	defer func() {
		b.mu.Lock()
		b.inFlight--
		close(b.answered)
		b.answered = make(chan struct{})
		b.mu.Unlock()
	}()
	if r.Body != nil {
		got, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err == nil && !bytes.Equal(got, b.payload) {
			b.t.Errorf("attempt %d sent %d bytes; want the caller's %d", n, len(got), len(b.payload))
		}
	}
	switch kind {
	case 1:
		b.mu.Lock()
		b.throttled = true // before the answer: a slow attempt begun after it expects no copy
		b.mu.Unlock()
		return b.respond(r, 503), nil
	case 2: // slow: answered once another attempt has answered after it began
		b.mu.Lock()
		throttled := b.throttled
		b.mu.Unlock()
		if throttled || !b.copyNext(n, k) {
			return b.respond(r, 200), nil
		}
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-answered:
			return b.respond(r, 200), nil
		}
	case 3:
		return b.respond(r, 404), nil
	case 4:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	case 5:
		return b.respond(r, 500), nil
	}
	return b.respond(r, 200), nil
}

func (b *hedgeBase) respond(r *http.Request, code int) *http.Response {
	body := &trackedBody{Reader: bytes.NewReader([]byte("answer"))}
	resp := &http.Response{StatusCode: code, Header: http.Header{}, Request: r, Body: body}
	b.mu.Lock()
	b.responses = append(b.responses, tracked{resp, body})
	b.mu.Unlock()
	return resp
}

// FuzzHedge drives a hedging Transport with fuzzed answers per attempt
// (quick, slow until a later copy answers, throttled, transient, permanent,
// errors), method, Idempotency-Key, body kind and size, MaxAttempts,
// MaxHedges and MaxBufferedBody. Invariants:
//
//   - no more attempts than MaxAttempts;
//   - an unsafe request never has two attempts in flight;
//   - every copy sends the caller's bytes;
//   - the caller's body is closed exactly once;
//   - exactly one of the response and the error is nil; every response
//     not returned is closed exactly once, the one returned not at all;
//   - the Summary counts the attempts and the copies the base saw;
//   - a slow attempt is never left waiting for a copy that never comes.
func FuzzHedge(f *testing.F) {
	f.Add([]byte{2, 0}, uint8(0), false, uint8(0), uint16(0), uint16(0), uint8(4), uint8(1))
	f.Add([]byte{2, 1, 2, 0}, uint8(2), false, uint8(2), uint16(3000), uint16(0), uint8(6), uint8(2))
	f.Add([]byte{2, 2, 2, 5, 1}, uint8(2), false, uint8(1), uint16(9000), uint16(4096), uint8(9), uint8(3))
	f.Add([]byte{2, 3}, uint8(1), true, uint8(3), uint16(100), uint16(0), uint8(3), uint8(1))
	f.Add([]byte{2, 4, 4}, uint8(1), false, uint8(1), uint16(100), uint16(0), uint8(3), uint8(1))
	f.Fuzz(func(t *testing.T, kinds []byte, methodIdx uint8, key bool, bodyKind uint8, bodySize, maxBuf uint16, maxAttempts, maxHedges uint8) {
		methods := []string{"GET", "POST", "PUT", "DELETE"}
		payload := make([]byte, int(bodySize)%20000)
		for i := range payload {
			payload[i] = byte(i*7 + 3)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, methods[int(methodIdx)%len(methods)], "http://fuzz.invalid/", nil)
		if err != nil {
			t.Fatal(err)
		}
		var caller *countingCloser
		buffered := false
		switch bodyKind % 4 {
		case 1: // GetBody
			caller = &countingCloser{Reader: bytes.NewReader(payload)}
			req.Body, req.ContentLength = caller, int64(len(payload))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }
		case 2: // opaque, unknown length
			caller = &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
			req.Body, req.ContentLength, buffered = caller, -1, true
		case 3: // opaque, known length
			caller = &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
			req.Body, req.ContentLength, buffered = caller, int64(len(payload)), true
		default:
			payload = nil
		}
		if key {
			req.Header.Set("Idempotency-Key", "fuzz")
		}
		if len(kinds) > 32 {
			kinds = kinds[:32]
		}
		attempts := int(maxAttempts%10) + 1
		hedges := int(maxHedges%4) + 1
		bufLimit := int64(maxBuf)
		if bufLimit == 0 {
			bufLimit = DefaultMaxBufferedBody
		}
		safe := ReplaySafe(req)
		base := &hedgeBase{t: t, kinds: kinds, payload: payload}
		base.copyNext = func(n, k int) bool {
			switch {
			case !safe, k >= hedges, n >= attempts:
				return false
			case attempts == 1, buffered && int64(len(payload)) > bufLimit:
				return false // no copy of a body that cannot be replayed
			}
			return true
		}
		var sum Summary
		rt, _ := testTransport(base, WithMaxAttempts(attempts), WithMaxBufferedBody(int64(maxBuf)), WithBudget(NoBudget),
			WithHedge(Hedge{Delay: time.Millisecond, MaxHedges: hedges}), WithOnDone(func(s Summary) { sum = s }),
			WithOnHedge(base.onHedge))
		resp, err := rt.RoundTrip(req)

		if ctx.Err() != nil {
			t.Fatalf("the call ran into its deadline: a slow attempt waited for a copy that never came")
		}
		base.mu.Lock()
		defer base.mu.Unlock()
		if base.calls > attempts {
			t.Errorf("%d attempts; MaxAttempts is %d", base.calls, attempts)
		}
		if !safe && base.maxFlight > 1 {
			t.Errorf("an unsafe request had %d attempts in flight at once", base.maxFlight)
		}
		if sum.Attempts != base.calls || sum.Hedges != len(base.copies) {
			t.Errorf("Summary counts %d attempts, %d copies; the base saw %d, OnHedge %d", sum.Attempts, sum.Hedges, base.calls, len(base.copies))
		}
		if !safe && len(base.copies) > 0 {
			t.Errorf("an unsafe request had %d copies", len(base.copies))
		}
		if (resp == nil) == (err == nil) {
			t.Fatalf("RoundTrip = %v, %v; want exactly one nil", resp, err)
		}
		if err != nil && !errors.As(err, new(*Error)) {
			t.Errorf("RoundTrip error %T %v; want a *Error", err, err)
		}
		checkClosed(t, base.responses, resp)
		if resp != nil {
			resp.Body.Close()
		}
		if caller != nil {
			if n := caller.closes.Load(); n != 1 {
				t.Errorf("the caller's body was closed %d times; want 1", n)
			}
		}
	})
}
