package retry

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/retrytest"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/require"
)

// fakeClock is the clock and sleep of a Transport under test.
type fakeClock = retrytest.Clock

// testTransport returns a Transport over base with a fake clock starting
// at the real time (so context deadlines line up) and u fixed at 0.5.
func testTransport(base http.RoundTripper, opts ...Option) (*Transport, *fakeClock) {
	clock := retrytest.NewClock(time.Now())
	t := New(base, opts...)
	t.now, t.sleep = clock.Now, clock.Sleep
	t.rand = func() float64 { return 0.5 }
	return t, clock
}

// proto is one of the protocols every transport test runs over: the
// default base (cleanhttp's pooled transport) speaks HTTP/1.1 to plain
// servers and negotiates HTTP/2 with TLS servers that offer it, and a
// base configured for it speaks HTTP/2 over cleartext (h2c).
type proto struct {
	name string
	h2   bool
	tls  bool
}

var (
	http1  = proto{name: "HTTP1"}
	protos = []proto{http1, {name: "h2c", h2: true}, {name: "h2TLS", h2: true, tls: true}}
)

// forEachProto runs f as a subtest over each protocol.
func forEachProto(t *testing.T, f func(t *testing.T, p proto)) {
	t.Helper()
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) { f(t, p) })
	}
}

// server starts h on a loopback server that speaks p, closed when the test
// ends. A request that arrives over another protocol fails the test, so a
// test cannot pass over HTTP/1.1 while it claims HTTP/2.
// Each of configure is called before the server starts.
func (p proto) server(t *testing.T, h http.Handler, configure ...func(*httptest.Server)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.ProtoMajor == 2) != p.h2 {
			t.Errorf("request over %s; want %s", r.Proto, p.name)
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = hostileLog
	// Headers up to 64 MiB, for the tests that stall a write with them.
	srv.Config.MaxHeaderBytes = 64 << 20
	for _, c := range configure {
		c(srv)
	}
	switch {
	case p.tls:
		srv.EnableHTTP2 = true
		srv.StartTLS()
	case p.h2:
		var ps http.Protocols
		ps.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = &ps
		srv.Start()
	default:
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// base returns a new base transport for srv, made as New(nil) makes its
// own, configured to speak p; its idle connections are closed when the
// test ends.
func (p proto) base(t *testing.T, srv *httptest.Server) *http.Transport {
	tr := cleanhttp.DefaultPooledTransport()
	switch {
	case p.tls:
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	case p.h2:
		var ps http.Protocols
		ps.SetUnencryptedHTTP2(true)
		tr.Protocols = &ps
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// script is a loopback server that answers attempt i with steps[i] (the
// last step repeats), recording every request it saw, and a base
// transport that speaks its protocol.
type script struct {
	srv     *httptest.Server
	base    *http.Transport
	mu      sync.Mutex
	steps   []func(w http.ResponseWriter, r *http.Request)
	seen    []seenRequest
	newConn atomic.Int32
}

type seenRequest struct {
	method  string
	header  http.Header
	bodySum [32]byte
	bodyLen int
}

// newScript is newScriptOver HTTP/1.1.
func newScript(t *testing.T, steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	t.Helper()
	return newScriptOver(t, http1, steps...)
}

func newScriptOver(t *testing.T, p proto, steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	t.Helper()
	s := &script{steps: steps}
	s.srv = p.server(t, http.HandlerFunc(s.serve), func(srv *httptest.Server) {
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.newConn.Add(1)
			}
		}
	})
	s.base = p.base(t, s.srv)
	return s
}

func (s *script) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.seen)
	s.seen = append(s.seen, seenRequest{method: r.Method, header: r.Header.Clone()})
	step := s.steps[min(i, len(s.steps)-1)]
	s.mu.Unlock()
	step(w, r)
}

// record hashes the request body into the entry of the current request.
func (s *script) record(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[len(s.seen)-1].bodySum = sha256.Sum256(b)
	s.seen[len(s.seen)-1].bodyLen = len(b)
}

func (s *script) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func status(code int, header ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	}
}

func do(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, string, error) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b), nil
}

func mustRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	return req
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}

// staticTransport answers every request at once, from memory.
type staticTransport struct{}

func (staticTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
}
