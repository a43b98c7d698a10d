package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/version"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Fault is what the raw HTTP/2 server does to the first request of a
// connection it was told to break. Later requests, and every request on
// the other connections, are answered 200.
type h2Fault int

const (
	h2OK h2Fault = iota
	// goAwayUnprocessed answers the request's HEADERS with GOAWAY
	// (last stream 0, NO_ERROR) and closes: the request was not processed,
	// as RFC 9113 §6.8 lets a client conclude.
	goAwayUnprocessed
	// goAwayProcessed executes the request, then sends GOAWAY naming its
	// stream as processed (NO_ERROR) and closes without answering.
	goAwayProcessed
	// goAwayMidBody executes the request, sends the response headers and
	// half of its body, then GOAWAY (INTERNAL_ERROR) and closes.
	goAwayMidBody
	// resetProtocolError executes the request and resets its stream with
	// PROTOCOL_ERROR; the connection stays up.
	resetProtocolError
	// resetEvery is resetProtocolError for every request of the
	// connection, not only the first.
	resetEvery
	// refuseStream resets the request's stream with REFUSED_STREAM on
	// its HEADERS, unprocessed (RFC 9113 §8.7); the connection stays up.
	refuseStream
	// refuseAndGoAway refuses the stream, then sends GOAWAY (last
	// stream 0) and closes: net/http's replay finds no connection.
	refuseAndGoAway
	// stallRead stops reading the connection for 25ms after the
	// request's HEADERS, as a busy server does, so that the client's
	// writes of this and other streams block; then serves it normally.
	stallRead
)

// h2Server is an HTTP/2 server over cleartext TCP (prior knowledge, RFC
// 9113 §3.3) built from golang.org/x/net/http2's Framer, so that it can
// send frames net/http's server never would. It executes requests as the
// recorder does: it counts an execution of a request id only when the
// whole body arrived, and checks the body's hash.
type h2Server struct {
	ln    net.Listener
	fault func(conn int) h2Fault
	// perRequest, if not nil, picks the fault of every request instead,
	// on every connection.
	perRequest func() h2Fault
	// etag, if not empty, is every response's ETag, and a GET with Range
	// bytes=N- and a matching If-Range is answered 206 with the rest.
	etag string

	mu        sync.Mutex
	closed    bool // close has run: accept closes what it accepts
	execs     map[string]int
	corrupted []string
	conns     []net.Conn
	wg        sync.WaitGroup
}

func newH2Server(t *testing.T, fault func(conn int) h2Fault) *h2Server {
	t.Helper()
	return newH2ServerWithETag(t, fault, "")
}

// newH2ServerWithETag is newH2Server whose responses carry etag and
// answer a range of the rest (see h2Server.etag).
func newH2ServerWithETag(t *testing.T, fault func(conn int) h2Fault, etag string) *h2Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2Server{ln: ln, fault: fault, etag: etag, execs: make(map[string]int)}
	s.wg.Go(s.accept)
	return s
}

func (s *h2Server) url() string { return "http://" + s.ln.Addr().String() }

func (s *h2Server) accept() {
	for n := 1; ; n++ {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			// Accepted as close ran: close would not see it.
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(c, s.fault(n)) })
	}
}

// close stops the server and waits for its goroutines.
func (s *h2Server) close() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *h2Server) executions(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs[id]
}

// h2Request is a request being received on one stream.
type h2Request struct {
	id, sum string
	fault   h2Fault // what the server does once it has executed it
	from    int     // the offset a range asks the body from; 0: the whole
	body    bytes.Buffer
}

func (s *h2Server) serve(c net.Conn, fault h2Fault) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	streams := make(map[uint32]*h2Request)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		var done uint32 // the stream whose request is complete
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.PingFrame:
			if !f.IsAck() && fr.WritePing(true, f.Data) != nil {
				return
			}
		case *http2.MetaHeadersFrame:
			id := f.StreamID
			if s.perRequest != nil {
				fault = s.perRequest()
			}
			switch fault {
			case goAwayUnprocessed:
				fr.WriteGoAway(0, http2.ErrCodeNo, nil)
				return
			case refuseStream:
				fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
				fault = h2OK // once per connection
				continue
			case refuseAndGoAway:
				fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
				fr.WriteGoAway(0, http2.ErrCodeNo, nil)
				return
			case stallRead:
				time.Sleep(25 * time.Millisecond)
			}
			streams[id] = &h2Request{id: f.PseudoValue("path"), sum: headerValue(f, headerSum), fault: fault, from: s.rangeFrom(f)}
			if fault == resetProtocolError {
				fault = h2OK // once per connection
			}
			if f.StreamEnded() {
				done = id
			}
		case *http2.DataFrame:
			r := streams[f.StreamID]
			if r == nil {
				continue
			}
			r.body.Write(f.Data())
			if n := len(f.Data()); n > 0 {
				// Give the flow-control credit back at once.
				fr.WriteWindowUpdate(0, uint32(n))
				fr.WriteWindowUpdate(f.StreamID, uint32(n))
			}
			if f.StreamEnded() {
				done = f.StreamID
			}
		}
		if done == 0 {
			continue
		}
		r := streams[done]
		delete(streams, done)
		s.execute(r)
		switch r.fault {
		case goAwayProcessed:
			fr.WriteGoAway(done, http2.ErrCodeNo, nil)
			return
		case goAwayMidBody:
			writeH2Response(fr, done, s.etag, r.from, len(responseBody)/2)
			fr.WriteGoAway(done, http2.ErrCodeInternal, nil)
			return
		case resetProtocolError, resetEvery:
			fr.WriteRSTStream(done, http2.ErrCodeProtocol)
			continue
		}
		if writeH2Response(fr, done, s.etag, r.from, len(responseBody)) != nil {
			return
		}
	}
}

func (s *h2Server) execute(r *h2Request) {
	sum := sha256.Sum256(r.body.Bytes())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execs[r.id]++
	if hex.EncodeToString(sum[:]) != r.sum {
		s.corrupted = append(s.corrupted, r.id)
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if http.CanonicalHeaderKey(hf.Name) == name {
			return hf.Value
		}
	}
	return ""
}

// writeH2Response sends responseBody from offset from (a 206 of the
// rest when from > 0, else a 200), with etag when not empty, and the
// body's bytes up to end: all of them ends the stream, fewer leave it
// open.
func writeH2Response(fr *http2.Framer, stream uint32, etag string, from, end int) error {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	status := "200"
	if from > 0 {
		status = "206"
	}
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: status})
	enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(responseBody) - from)})
	if etag != "" {
		enc.WriteField(hpack.HeaderField{Name: "etag", Value: etag})
	}
	if from > 0 {
		enc.WriteField(hpack.HeaderField{Name: "content-range", Value: fmt.Sprintf("bytes %d-%d/%d", from, len(responseBody)-1, len(responseBody))})
	}
	err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block.Bytes(), EndHeaders: true})
	if err != nil {
		return err
	}
	return fr.WriteData(stream, end == len(responseBody), responseBody[from:max(end, from)])
}

// rangeFrom returns the offset a request's Range (bytes=N-) asks for,
// when the server answers ranges and its If-Range matches; 0 otherwise.
func (s *h2Server) rangeFrom(f *http2.MetaHeadersFrame) int {
	if s.etag == "" || headerValue(f, "If-Range") != s.etag {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(headerValue(f, "Range"), "bytes="), "-"))
	if err != nil || n < 0 || n >= len(responseBody) {
		return 0
	}
	return n
}

// h2Transport returns a net/http Transport that speaks HTTP/2 over
// cleartext TCP only.
func h2Transport() *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: &p}
}

// h2Do sends one request of kind k (its id in the path) through rt and
// returns its id, the response body read and the errors of RoundTrip and
// of reading the body.
func h2Do(ctx context.Context, t *testing.T, rt http.RoundTripper, url string, k kind) (id string, body []byte, rtErr, readErr error) {
	t.Helper()
	id = "/" + k.name + "-" + strconv.FormatInt(idSeq.Add(1), 10)
	payload := bytes.Repeat([]byte{byte(len(id))}, k.body)
	sum := sha256.Sum256(payload)
	var r io.Reader
	if k.body > 0 {
		r = bytes.NewReader(payload)
		if k.opaque {
			r = &opaqueReader{r}
		}
	}
	req, err := http.NewRequestWithContext(ctx, k.method, url+id, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(headerSum, hex.EncodeToString(sum[:]))
	if k.key {
		req.Header.Set("Idempotency-Key", id)
	}
	resp, rtErr := rt.RoundTrip(req)
	if rtErr != nil {
		return id, nil, rtErr, nil
	}
	defer resp.Body.Close()
	body, readErr = io.ReadAll(resp.Body)
	return id, body, nil, readErr
}

// TestHTTP2GoAway breaks the first connection of an HTTP/2 server in each
// way a GOAWAY can, for each kind of request, and checks what the
// Transport makes of it. The server's other connections are healthy.
//
// Bound: each case makes at most 4 attempts 1ms apart against a loopback
// server that answers at once; nothing waits on a timer.
func TestHTTP2GoAway(t *testing.T) {
	tests := []struct {
		name  string
		fault h2Fault
		// unsafeExecs is how often the server executes an unsafe request
		// (POST without a key); unsafeOK whether the caller gets a 200.
		unsafeExecs int
		unsafeOK    bool
		// safeExecs is how often it executes a safe one, which succeeds.
		safeExecs int
		// readFails: the response is returned, and reading its body fails.
		readFails bool
	}{
		// The stream was never processed. net/http replays it only with
		// GetBody, which an unsafe request's attempts do not carry: the
		// error net/http then returns is untyped and cannot be told from
		// a PROTOCOL_ERROR reset, which the server may have processed,
		// so an unsafe request fails as unsafe to replay, unexecuted.
		{name: "GOAWAY before processing", fault: goAwayUnprocessed, unsafeExecs: 0, safeExecs: 1},
		// The stream was processed and the connection closed with no
		// response: an unsafe request fails as unsafe to replay, a safe
		// one is replayed on a new connection.
		{name: "GOAWAY after processing", fault: goAwayProcessed, unsafeExecs: 1, safeExecs: 2},
		// The response was already returned when the GOAWAY came: the
		// Transport's work was done; the caller's read fails.
		{name: "GOAWAY mid-body", fault: goAwayMidBody, unsafeExecs: 1, unsafeOK: true, safeExecs: 1, readFails: true},
	}
	h2Kinds := []kind{
		{name: "GET", method: http.MethodGet},
		{name: "PUT-buffered", method: http.MethodPut, body: 4 << 10, opaque: true},
		{name: "POST-key", method: http.MethodPost, key: true, body: 4 << 10, opaque: true},
		{name: "POST", method: http.MethodPost, body: 4 << 10, opaque: true},
		{name: "POST-GetBody", method: http.MethodPost, body: 4 << 10},
	}
	for _, tt := range tests {
		for _, k := range h2Kinds {
			t.Run(tt.name+"/"+k.name, func(t *testing.T) {
				fds := openFDs(t)
				s := newH2Server(t, func(conn int) h2Fault {
					if conn == 1 {
						return tt.fault
					}
					return h2OK
				})
				var gaveUp retry.Event
				base := h2Transport()
				rt := retry.New(base, retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
					retry.WithOnGiveUp(func(e retry.Event) { gaveUp = e }))
				id, body, rtErr, readErr := h2Do(context.Background(), t, rt, s.url(), k)
				rt.CloseIdleConnections()
				s.close()

				n := s.executions(id)
				if len(s.corrupted) > 0 {
					t.Errorf("corrupted bodies executed: %v", s.corrupted)
				}
				wantExecs, wantOK := tt.safeExecs, true
				if !k.safe() {
					wantExecs, wantOK = tt.unsafeExecs, tt.unsafeOK
				}
				if n != wantExecs {
					t.Errorf("%s executed %d times; want %d (RoundTrip error: %v)", id, n, wantExecs, rtErr)
				}
				switch {
				case wantOK && rtErr != nil:
					t.Errorf("RoundTrip error: %v; want a response", rtErr)
				case !wantOK && rtErr == nil:
					t.Errorf("RoundTrip succeeded; want an error")
				case !wantOK:
					var re *retry.Error
					if !errors.As(rtErr, &re) || re.Reason != retry.StopUnsafe || re.Attempts != 1 {
						t.Errorf("RoundTrip error: %v; want a *retry.Error after 1 attempt, unsafe to replay", rtErr)
					}
					if gaveUp.Class != retry.Transient {
						t.Errorf("gave up on class %v; want transient", gaveUp.Class)
					}
				case tt.readFails && readErr == nil:
					t.Errorf("reading the body succeeded (%d bytes); want an error", len(body))
				case !tt.readFails && (readErr != nil || !bytes.Equal(body, responseBody)):
					t.Errorf("reading the body: %d bytes, %v; want the whole body", len(body), readErr)
				}
				checkNoLeaks(t, fds)
			})
		}
	}
}

// TestHTTP2GoAwayMidBodyResumed: a GET whose body an HTTP/2 GOAWAY
// (INTERNAL_ERROR) breaks halfway is resumed on a new connection with
// Range and If-Range, when its answer carries a strong ETag: the caller
// reads the whole body, once.
//
// Bound: two requests to a loopback server that answers at once.
func TestHTTP2GoAwayMidBodyResumed(t *testing.T) {
	fds := openFDs(t)
	s := newH2ServerWithETag(t, func(conn int) h2Fault {
		if conn == 1 {
			return goAwayMidBody
		}
		return h2OK
	}, `"v1"`)
	var events []retry.ResumeEvent
	rt := retry.New(h2Transport(), retry.WithOnResume(func(e retry.ResumeEvent) { events = append(events, e) }))
	id, body, rtErr, readErr := h2Do(context.Background(), t, rt, s.url(), kind{name: "GET", method: http.MethodGet})
	rt.CloseIdleConnections()
	s.close()
	if rtErr != nil || readErr != nil || !bytes.Equal(body, responseBody) {
		t.Fatalf("read %d of %d bytes: %v, %v; want the whole body", len(body), len(responseBody), rtErr, readErr)
	}
	if len(events) != 1 || events[0].Err != nil || events[0].Offset != int64(len(responseBody)/2) {
		t.Errorf("resumes %+v; want one, at byte %d", events, len(responseBody)/2)
	}
	if n := s.executions(id); n != 2 {
		t.Errorf("%s executed %d times; want 2: the GET and its resume", id, n)
	}
	checkNoLeaks(t, fds)
}

// h2ReplaysAfterProtocolError reports whether this Go's HTTP/2 client
// replays a request after a PROTOCOL_ERROR reset by itself, the hazard
// below: Go 1.27's no longer does, and there net/http alone executes the
// POST once too.
var h2ReplaysAfterProtocolError = version.Compare(runtime.Version(), "go1.27") < 0

// TestH2ProtocolErrorDoesNotReplayUnsafeRequest: a server executes a POST
// (no Idempotency-Key) and then resets its stream with PROTOCOL_ERROR.
// net/http's HTTP/2 transport replays any request after such a reset when
// it can rewind the body (h2_bundle.go, http2canRetryError,
// golang/go#47635), and a request without a body always: alone, it runs
// such a POST 800 to 1,500 times in 300ms. The attempts of
// an unsafe request carry no GetBody, and the Transport stops a replay of
// one without a body before it is written (its trace sees a second
// connection handed to a request already written whole). So it is executed
// once, whether the server resets the first stream or every stream
// (where net/http alone replays it for as long as the context lasts, with
// no context deadline for ever), and the call ends at once.
//
// Bound: with the Transport, one attempt, checked by a 10s guard that only
// a replay loop reaches; without it, the 300ms context deadline.
func TestH2ProtocolErrorDoesNotReplayUnsafeRequest(t *testing.T) {
	posts := []kind{
		{name: "POST", method: http.MethodPost, body: 4 << 10, opaque: true},
		{name: "POST-GetBody", method: http.MethodPost, body: 4 << 10},
		{name: "POST-no-body", method: http.MethodPost},
	}
	for _, post := range posts {
		for _, every := range []bool{false, true} {
			for _, withRetry := range []bool{false, true} {
				name := "first stream"
				fault := resetProtocolError
				if every {
					name, fault = "every stream", resetEvery
				}
				t.Run(post.name+"/"+name+"/retry="+strconv.FormatBool(withRetry), func(t *testing.T) {
					fds := openFDs(t)
					s := newH2Server(t, func(int) h2Fault { return fault })
					base := h2Transport()
					var rt http.RoundTripper = base
					ctx := context.Background()
					var gaveUp retry.Event
					if withRetry {
						rt = retry.New(base, retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
							retry.WithOnGiveUp(func(e retry.Event) { gaveUp = e }))
					} else {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
						defer cancel()
					}
					var id string
					var rtErr error
					done := make(chan struct{})
					go func() {
						defer close(done)
						id, _, rtErr, _ = h2Do(ctx, t, rt, s.url(), post)
					}()
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						s.close() // ends the replays
						<-done
						t.Fatalf("RoundTrip still running after 10s: net/http replays the POST")
					}
					base.CloseIdleConnections()
					s.close()
					n := s.executions(id)
					switch {
					case !withRetry && (post.body == 0 || !post.opaque) && h2ReplaysAfterProtocolError:
						// net/http alone: the hazard the Transport removes,
						// shown so that the server is known to provoke it.
						if n < 2 {
							t.Errorf("net/http alone executed %s %d times; want it replayed", id, n)
						}
					case n != 1:
						t.Errorf("unsafe %s executed %d times; want 1 (RoundTrip error: %v)", id, n, rtErr)
					}
					if withRetry {
						var re *retry.Error
						if !errors.As(rtErr, &re) || re.Reason != retry.StopUnsafe || re.Attempts != 1 || gaveUp.Class != retry.Transient {
							t.Errorf("RoundTrip error: %v (class %v); want a transient *retry.Error after 1 attempt, unsafe to replay", rtErr, gaveUp.Class)
						}
					}
					checkNoLeaks(t, fds)
				})
			}
		}
	}
}

// TestH2RefusedStreamAndGoAwayClosesBody: the server refuses a safe
// request's stream and goes away. net/http calls the GetBody the Transport
// installs for a streamed body, finds no connection, drops that reader
// unread and unclosed, and replays on a new connection with another. The
// request succeeds once, and the caller's body is closed exactly once (a
// reader that was never read does not keep it open).
func TestH2RefusedStreamAndGoAwayClosesBody(t *testing.T) {
	for _, k := range []kind{
		{name: "PUT-buffered", method: http.MethodPut, body: 4 << 10, opaque: true},
		{name: "POST-key", method: http.MethodPost, key: true, body: 4 << 10, opaque: true},
	} {
		t.Run(k.name, func(t *testing.T) {
			fds := openFDs(t)
			s := newH2Server(t, func(conn int) h2Fault {
				if conn == 1 {
					return refuseAndGoAway
				}
				return h2OK
			})
			base := h2Transport()
			rt := retry.New(base, retry.WithBackoff(retry.Constant{Base: time.Millisecond}))
			id := "/" + k.name + "-" + strconv.FormatInt(idSeq.Add(1), 10)
			payload := bytes.Repeat([]byte{7}, k.body)
			sum := sha256.Sum256(payload)
			body := &closeCounter{r: &opaqueReader{bytes.NewReader(payload)}}
			req, err := http.NewRequest(k.method, s.url()+id, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(headerSum, hex.EncodeToString(sum[:]))
			if k.key {
				req.Header.Set("Idempotency-Key", id)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, responseBody) {
				t.Errorf("response body: %d bytes, %v; want the whole body", len(got), err)
			}
			base.CloseIdleConnections()
			s.close()
			if n := s.executions(id); n != 1 {
				t.Errorf("%s executed %d times; want 1", id, n)
			}
			if len(s.corrupted) > 0 {
				t.Errorf("corrupted bodies executed: %v", s.corrupted)
			}
			deadline := time.Now().Add(5 * time.Second)
			for body.closes.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // net/http may close it after RoundTrip returned
			}
			if n := body.closes.Load(); n != 1 {
				t.Errorf("the caller's body was closed %d times; want 1", n)
			}
			checkNoLeaks(t, fds)
		})
	}
}

// TestH2RefusedStreamWithoutBody pins down the price of stopping
// net/http's own replays: a POST without a body whose stream the server
// refuses (RFC 9113 §8.7: not processed) is not replayed by net/http
// either, since the trace cannot tell REFUSED_STREAM from PROTOCOL_ERROR.
// It fails as unsafe to replay, unexecuted; with an Idempotency-Key it is
// retried and succeeds.
func TestH2RefusedStreamWithoutBody(t *testing.T) {
	for _, k := range []kind{
		{name: "POST-no-body", method: http.MethodPost},
		{name: "POST-no-body-key", method: http.MethodPost, key: true},
	} {
		t.Run(k.name, func(t *testing.T) {
			fds := openFDs(t)
			s := newH2Server(t, func(int) h2Fault { return refuseStream })
			base := h2Transport()
			rt := retry.New(base, retry.WithBackoff(retry.Constant{Base: time.Millisecond}))
			id, _, rtErr, _ := h2Do(context.Background(), t, rt, s.url(), k)
			base.CloseIdleConnections()
			s.close()
			n := s.executions(id)
			if k.key {
				if rtErr != nil || n != 1 {
					t.Errorf("RoundTrip error %v, %d executions; want a response, executed once", rtErr, n)
				}
			} else {
				var re *retry.Error
				if !errors.As(rtErr, &re) || re.Reason != retry.StopUnsafe || n != 0 {
					t.Errorf("RoundTrip error %v, %d executions; want unsafe to replay, not executed", rtErr, n)
				}
			}
			checkNoLeaks(t, fds)
		})
	}
}
