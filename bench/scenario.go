package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
)

// Sizes of the scenarios' bodies.
const (
	S1Response = 1 << 10  // S1: a GET answered with 1 KiB
	S2Body     = 64 << 10 // S2: a POST of 64 KiB from a bytes.Reader
	S3Body     = 1 << 20  // S3: a POST of 1 MiB from an opaque reader
)

// Scenario is one kind of request the benchmarks send.
type Scenario struct {
	// Name is the value of the benchmarks' /scenario= key.
	Name string
	// Path is the server path that answers it.
	Path string
	// NewRequest returns a fresh request to url+Path with context ctx.
	// It allocates no body bytes: bodies read from payloads made once.
	NewRequest func(ctx context.Context, url string) *http.Request
	// Failures is how many 503 responses precede the 200 the server
	// answers each request with.
	Failures int
	// BodyBytes is the size of the request body the server must see.
	BodyBytes int64
}

var (
	payload1K  = pattern(S1Response)
	payload64K = pattern(S2Body)
	payload1M  = pattern(S3Body)
)

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// Opaque hides everything about a reader but Read, as a pipe or a
// decompressor would: http.NewRequest sets no GetBody and no length for it.
type Opaque struct{ io.Reader }

// Scenarios are S1 to S4, in order.
var Scenarios = []Scenario{
	{
		Name: "S1-GET-1KiB", Path: "/s1",
		NewRequest: func(ctx context.Context, url string) *http.Request { return mustRequest(ctx, "GET", url+"/s1", nil) },
	},
	{
		Name: "S2-POST-64KiB-GetBody", Path: "/s2", BodyBytes: S2Body,
		NewRequest: func(ctx context.Context, url string) *http.Request {
			return mustRequest(ctx, "POST", url+"/s2", bytes.NewReader(payload64K))
		},
	},
	{
		Name: "S3-POST-1MiB-opaque", Path: "/s3", BodyBytes: S3Body,
		NewRequest: func(ctx context.Context, url string) *http.Request {
			return mustRequest(ctx, "POST", url+"/s3", Opaque{bytes.NewReader(payload1M)})
		},
	},
	{
		Name: "S4-GET-503x2-then-200", Path: "/s4", Failures: 2,
		NewRequest: func(ctx context.Context, url string) *http.Request { return mustRequest(ctx, "GET", url+"/s4", nil) },
	},
}

func mustRequest(ctx context.Context, method, url string, body io.Reader) *http.Request {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		panic(err)
	}
	return req
}

// Server is the loopback keep-alive server of the benchmarks. It counts the
// connections it accepts and the body bytes it reads.
type Server struct {
	*httptest.Server
	NewConns  atomic.Int64
	BodyBytes atomic.Int64
	seq       atomic.Int64 // requests to /s4, for its 503, 503, 200 cycle
}

// NewServer starts a Server on 127.0.0.1.
func NewServer() *Server {
	s := new(Server)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.NewConns.Add(1)
		}
	}
	s.Start()
	return s
}

var okBody = []byte("ok")

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	s.BodyBytes.Add(n)
	switch r.URL.Path {
	case "/s1":
		w.Header().Set("Content-Length", strconv.Itoa(len(payload1K)))
		w.Write(payload1K)
	case "/s4":
		if s.seq.Add(1)%3 != 0 {
			w.Header().Set("Content-Length", "11")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("unavailable"))
			return
		}
		w.Write(okBody)
	default:
		w.Write(okBody)
	}
}

// Memory is an in-memory base transport that answers as Server does,
// without a network: it reads and discards the request body and returns a
// response whose body is read from memory.
type Memory struct {
	BodyBytes atomic.Int64
	seq       atomic.Int64
}

func (m *Memory) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		n, err := io.Copy(io.Discard, r.Body)
		r.Body.Close()
		m.BodyBytes.Add(n)
		if err != nil {
			return nil, err
		}
	}
	code, body := http.StatusOK, okBody
	switch r.URL.Path {
	case "/s1":
		body = payload1K
	case "/s4":
		if m.seq.Add(1)%3 != 0 {
			code, body = http.StatusServiceUnavailable, []byte("unavailable")
		}
	}
	return &http.Response{
		Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// Do sends one request of scenario s to url through rt, reads the answer
// and checks it is a 200 with the expected body. The bare library does the
// retries of S4 itself, as its caller would have to: one request per
// attempt, each discarded response read to the end and closed.
func Do(rt http.RoundTripper, bare bool, s Scenario, url string) error {
	attempts := 1
	if bare {
		attempts += s.Failures
	}
	// Every operation has a context of its own, ended when it is done, as
	// an http.Client with a Timeout gives each request: a library that
	// leaves a discarded response unread and open (failsafe-go does) has
	// its connection torn down then, rather than leaked.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range attempts {
		resp, err := rt.RoundTrip(s.NewRequest(ctx, url))
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if i < attempts-1 {
			if resp.StatusCode != http.StatusServiceUnavailable {
				return fmt.Errorf("%s: attempt %d: status %d; want 503", s.Name, i+1, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: status %d; want 200", s.Name, resp.StatusCode)
		}
		if want := wantBody(s); n != want {
			return fmt.Errorf("%s: response of %d bytes; want %d", s.Name, n, want)
		}
	}
	return nil
}

func wantBody(s Scenario) int64 {
	if s.Path == "/s1" {
		return S1Response
	}
	return int64(len(okBody))
}

// errShortBody is returned by CheckBodies when the server saw fewer body
// bytes than the requests sent.
var errShortBody = errors.New("bench: the server saw fewer body bytes than were sent")

// CheckBodies reports whether a base that saw got body bytes in total saw
// every byte of ops requests of scenario s.
func CheckBodies(s Scenario, ops int, got int64) error {
	if got < int64(ops)*s.BodyBytes {
		return fmt.Errorf("%w: %d < %d×%d", errShortBody, got, ops, s.BodyBytes)
	}
	return nil
}

// Copying is an opaque reader that copies everything it yields into chunks
// kept until it is dropped, as retry's replay body does (the same chunk
// sizes), and does nothing else: a bare transport sending through it pays
// for that copy alone.
type Copying struct {
	R      io.Reader
	chunks [][]byte
	n      int
}

func (c *Copying) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	q := p[:n]
	for len(q) > 0 {
		var last []byte
		if len(c.chunks) > 0 {
			last = c.chunks[len(c.chunks)-1]
		}
		if len(last) == cap(last) {
			size := max(min(max(c.n, 512), 64<<10), len(q))
			c.chunks = append(c.chunks, make([]byte, 0, size))
			last = c.chunks[len(c.chunks)-1]
		}
		k := min(len(q), cap(last)-len(last))
		c.chunks[len(c.chunks)-1] = append(last, q[:k]...)
		q, c.n = q[k:], c.n+k
	}
	return n, err
}
