package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassString(t *testing.T) {
	tests := []struct {
		c    Class
		want string
	}{
		{Undecided, "undecided"},
		{Success, "success"},
		{Permanent, "permanent"},
		{Throttled, "throttled"},
		{Transient, "transient"},
		{Unsent, "unsent"},
		{Class(6), "Class(6)"},
		{Class(255), "Class(255)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.c.String(); got != tt.want {
				t.Errorf("Class(%d).String() = %q; want %q", uint8(tt.c), got, tt.want)
			}
		})
	}
}

// wantStatusClass is the design's status table, written as lists so that
// it does not share code with classifyStatus.
func wantStatusClass(code int) Class {
	switch code {
	case 429, 503:
		return Throttled
	case 408:
		return Transient
	case 501, 505:
		return Permanent
	}
	switch code / 100 {
	case 1, 2, 3:
		return Success
	case 4:
		return Permanent
	case 5:
		return Transient
	}
	return Permanent
}

func TestDefaultClassifierStatus(t *testing.T) {
	codes := []int{0, 1, 99, 600, 601, 999, 1000, -1}
	for code := 100; code <= 599; code++ {
		codes = append(codes, code)
	}
	// Spot checks that the table above says what the design says.
	require.Equal(t, Throttled, wantStatusClass(429))
	require.Equal(t, Transient, wantStatusClass(502))
	require.Equal(t, Permanent, wantStatusClass(404))
	require.Equal(t, Success, wantStatusClass(304))

	for _, code := range codes {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			o := Outcome{
				Request:  httptest.NewRequest(http.MethodGet, "http://example.com/", nil),
				Response: &http.Response{StatusCode: code, Body: http.NoBody},
				Attempt:  1,
			}
			if got, want := DefaultClassifier(o), wantStatusClass(code); got != want {
				t.Errorf("DefaultClassifier(status %d) = %v; want %v", code, got, want)
			}
		})
	}
}

func TestDefaultClassifierStatusViaMock(t *testing.T) {
	// A sequence of responses from a mock base, classified as the
	// Transport would classify them.
	mock := httpmock.NewMockTransport()
	statuses := []int{503, 429, 500, 400, 200}
	var calls int
	mock.RegisterResponder(http.MethodPost, "http://api.example.com/v1/items",
		func(*http.Request) (*http.Response, error) {
			code := statuses[calls%len(statuses)]
			calls++
			return httpmock.NewStringResponse(code, "{}"), nil
		})
	want := []Class{Throttled, Throttled, Transient, Permanent, Success}
	for i, w := range want {
		req := httptest.NewRequest(http.MethodPost, "http://api.example.com/v1/items", strings.NewReader("{}"))
		resp, err := mock.RoundTrip(req)
		require.NoError(t, err)
		got := DefaultClassifier(Outcome{Request: req, Response: resp, Attempt: i + 1})
		resp.Body.Close()
		assert.Equal(t, w, got, "attempt %d, status %d", i+1, resp.StatusCode)
	}
	assert.Equal(t, len(want), calls)
}

func TestDefaultClassifierNoResponseNoError(t *testing.T) {
	if got := DefaultClassifier(Outcome{Attempt: 1}); got != Permanent {
		t.Errorf("DefaultClassifier(no response, no error) = %v; want %v", got, Permanent)
	}
}

func TestChain(t *testing.T) {
	always := func(c Class) Classifier { return func(Outcome) Class { return c } }
	undecided := always(Undecided)
	tests := []struct {
		name string
		cs   []Classifier
		want Class
	}{
		{"empty", nil, Undecided},
		{"all nil", []Classifier{nil, nil}, Undecided},
		{"all undecided", []Classifier{undecided, undecided}, Undecided},
		{"first definite wins", []Classifier{always(Throttled), always(Permanent)}, Throttled},
		{"undecided passes on", []Classifier{undecided, always(Transient), always(Permanent)}, Transient},
		{"nil skipped", []Classifier{nil, undecided, nil, always(Unsent)}, Unsent},
		{"default last", []Classifier{undecided, DefaultClassifier}, Success},
	}
	o := Outcome{
		Request:  httptest.NewRequest(http.MethodGet, "http://example.com/", nil),
		Response: &http.Response{StatusCode: http.StatusOK, Body: http.NoBody},
		Attempt:  1,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Chain(tt.cs...)(o); got != tt.want {
				t.Errorf("Chain(...)(o) = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestChainStopsAtFirstAnswer(t *testing.T) {
	var asked []int
	ask := func(i int, c Class) Classifier {
		return func(Outcome) Class {
			asked = append(asked, i)
			return c
		}
	}
	got := Chain(ask(1, Undecided), ask(2, Throttled), ask(3, Permanent))(Outcome{})
	assert.Equal(t, Throttled, got)
	assert.Equal(t, []int{1, 2}, asked)
}

func TestChainCopiesItsArguments(t *testing.T) {
	cs := []Classifier{func(Outcome) Class { return Throttled }}
	c := Chain(cs...)
	cs[0] = func(Outcome) Class { return Permanent }
	if got := c(Outcome{}); got != Throttled {
		t.Errorf("Chain after its slice changed = %v; want %v", got, Throttled)
	}
}

// fakeH2StreamError stands in for net/http's unexported HTTP/2 stream
// error in tests: a different type with the same fields, reached through
// errors.As's As hook the way net/http's is.
type fakeH2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e fakeH2StreamError) Error() string { return "stream error" }

func (e fakeH2StreamError) As(target any) bool {
	se, ok := target.(*h2StreamError)
	if ok {
		*se = h2StreamError(e)
	}
	return ok
}

// errUnknown is an error of no type the classifier knows.
var errUnknown = errors.New("something odd")

func TestDefaultClassifierErrors(t *testing.T) {
	get := func() *http.Request { return httptest.NewRequest(http.MethodGet, "http://example.com/", nil) }
	withCtx := func(ctx context.Context) *http.Request { return get().WithContext(ctx) }

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	canceledWithCause, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errUnknown)
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancelExpired()
	attemptExpired, cancelAttempt := context.WithDeadlineCause(context.Background(), time.Unix(0, 0), ErrAttemptTimeout)
	defer cancelAttempt()
	parent, cancelParent := context.WithCancel(context.Background())
	child, cancelChild := context.WithTimeoutCause(parent, time.Hour, ErrAttemptTimeout)
	defer cancelChild()
	cancelParent() // the caller gave up while an attempt was running

	legacy := get()
	closed := make(chan struct{})
	close(closed)
	//lint:ignore SA1019 the deprecated field is what is tested.
	legacy.Cancel = closed
	open := get()
	//lint:ignore SA1019 the deprecated field is what is tested.
	open.Cancel = make(chan struct{})

	reqWith := func(mutate func(*http.Request)) *http.Request {
		r := get()
		mutate(r)
		return r
	}
	redirectResp := &http.Response{StatusCode: http.StatusFound, Body: http.NoBody}

	tests := []struct {
		name  string
		req   *http.Request
		resp  *http.Response
		err   error
		wrote WriteState
		want  Class
	}{
		// The caller's own end.
		{"caller canceled", withCtx(canceled), nil, context.Canceled, WroteRequest, Permanent},
		{"caller canceled, nothing written", withCtx(canceled), nil, context.Canceled, WroteNothing, Permanent},
		{"caller canceled with cause", withCtx(canceledWithCause), nil, errUnknown, WroteRequest, Permanent},
		{"caller deadline", withCtx(expired), nil, context.DeadlineExceeded, WriteUnknown, Permanent},
		{"caller gone, other error", withCtx(canceled), nil, &net.OpError{Op: "read", Err: errUnknown}, WroteRequest, Permanent},
		{"caller canceled during attempt", withCtx(child), nil, context.Canceled, WroteRequest, Permanent},
		{"legacy Cancel closed", legacy, nil, errUnknown, WroteRequest, Permanent},
		{"legacy Cancel open", open, nil, errUnknown, WroteRequest, Transient},

		// Attempt timeouts.
		{"attempt timeout", withCtx(attemptExpired), nil, ErrAttemptTimeout, WroteRequest, Transient},
		{"attempt timeout, unknown write", withCtx(attemptExpired), nil, ErrAttemptTimeout, WriteUnknown, Transient},
		{"attempt timeout, nothing written", withCtx(attemptExpired), nil, ErrAttemptTimeout, WroteNothing, Unsent},
		{"attempt timeout as DeadlineExceeded", withCtx(attemptExpired), nil, context.DeadlineExceeded, WroteHeaders, Transient},
		{"attempt timeout wrapped", get(), nil, fmt.Errorf("wrapped: %w", ErrAttemptTimeout), WroteRequest, Transient},
		{"attempt timeout, no request", nil, nil, ErrAttemptTimeout, WroteNothing, Unsent},

		// Redirects.
		{"response with error", get(), redirectResp, &url.Error{Op: "Get", URL: "/", Err: errUnknown}, WriteUnknown, Permanent},
		{"ErrUseLastResponse", get(), nil, fmt.Errorf("policy: %w", http.ErrUseLastResponse), WriteUnknown, Permanent},

		// Requests net/http will not send.
		{"nil URL", reqWith(func(r *http.Request) { r.URL = nil }), nil, errUnknown, WroteNothing, Permanent},
		{"ftp scheme", reqWith(func(r *http.Request) { r.URL.Scheme = "ftp" }), nil, errUnknown, WroteNothing, Permanent},
		{"no scheme", reqWith(func(r *http.Request) { r.URL.Scheme = "" }), nil, errUnknown, WroteNothing, Permanent},
		{"no host", reqWith(func(r *http.Request) { r.URL.Host = "" }), nil, errUnknown, WroteNothing, Permanent},
		{"invalid method", reqWith(func(r *http.Request) { r.Method = "GET /" }), nil, errUnknown, WroteNothing, Permanent},
		{"invalid header name", reqWith(func(r *http.Request) { r.Header["Bad Name"] = []string{"x"} }), nil, errUnknown, WroteNothing, Permanent},
		{"invalid header value", reqWith(func(r *http.Request) { r.Header.Set("X-Bad", "a\r\nb") }), nil, errUnknown, WroteNothing, Permanent},
		{"invalid trailer", reqWith(func(r *http.Request) { r.Trailer = http.Header{"X-T": {"\x00"}} }), nil, errUnknown, WroteNothing, Permanent},
		{"nil header", reqWith(func(r *http.Request) { r.Header = nil }), nil, errUnknown, WroteNothing, Permanent},
		{"tab in header value", reqWith(func(r *http.Request) { r.Header.Set("X-Ok", "a\tb") }), nil, errUnknown, WroteNothing, Unsent},
		{"https scheme", reqWith(func(r *http.Request) { r.URL.Scheme = "https" }), nil, errUnknown, WroteNothing, Unsent},

		// TLS.
		{"CertificateVerificationError", get(), nil, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, WroteNothing, Permanent},
		{"UnknownAuthorityError", get(), nil, x509.UnknownAuthorityError{}, WroteNothing, Permanent},
		{"HostnameError", get(), nil, fmt.Errorf("tls: %w", x509.HostnameError{Host: "a.example"}), WriteUnknown, Permanent},
		{"CertificateInvalidError", get(), nil, x509.CertificateInvalidError{Reason: x509.Expired}, WroteNothing, Permanent},
		{"UnhandledCriticalExtension", get(), nil, x509.UnhandledCriticalExtension{}, WroteNothing, Permanent},
		{"ConstraintViolationError", get(), nil, x509.ConstraintViolationError{}, WroteNothing, Permanent},
		{"SystemRootsError", get(), nil, x509.SystemRootsError{Err: errUnknown}, WroteNothing, Permanent},
		{"RecordHeaderError", get(), nil, tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, WroteNothing, Permanent},
		{"ErrSchemeMismatch", get(), nil, &url.Error{Op: "Get", URL: "https://x/", Err: http.ErrSchemeMismatch}, WriteUnknown, Permanent},

		// DNS.
		{"DNS not found", get(), nil, &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}, WroteNothing, Permanent},
		{"DNS not found, unknown write", get(), nil, &net.DNSError{Err: "no such host", IsNotFound: true}, WriteUnknown, Permanent},
		{"DNS temporary", get(), nil, &net.OpError{Op: "dial", Err: &net.DNSError{Err: "server misbehaving", IsTemporary: true}}, WriteUnknown, Unsent},
		{"DNS timeout", get(), nil, &net.DNSError{Err: "i/o timeout", IsTimeout: true}, WriteUnknown, Unsent},
		{"DNS other", get(), nil, &net.DNSError{Err: "no answer"}, WriteUnknown, Unsent},

		// Connecting.
		{"dial refused", get(), nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errUnknown)}, WriteUnknown, Unsent},
		{"dial timeout", get(), nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, WriteUnknown, Unsent},
		{"proxyconnect", get(), nil, &net.OpError{Op: "proxyconnect", Err: &net.OpError{Op: "dial", Err: errUnknown}}, WriteUnknown, Unsent},

		// HTTP/2.
		{"h2 REFUSED_STREAM", get(), nil, fakeH2StreamError{StreamID: 1, Code: 0x7}, WroteRequest, Unsent},
		{"h2 REFUSED_STREAM wrapped", get(), nil, fmt.Errorf("h2: %w", fakeH2StreamError{StreamID: 3, Code: 0x7}), WriteUnknown, Unsent},
		{"h2 INTERNAL_ERROR", get(), nil, fakeH2StreamError{StreamID: 1, Code: 0x2}, WroteRequest, Transient},
		{"h2 INTERNAL_ERROR, nothing written", get(), nil, fakeH2StreamError{StreamID: 1, Code: 0x2}, WroteNothing, Unsent},

		// What httptrace saw.
		{"nothing written", get(), nil, errUnknown, WroteNothing, Unsent},
		{"headers written", get(), nil, errUnknown, WroteHeaders, Transient},
		{"request written", get(), nil, errUnknown, WroteRequest, Transient},
		{"unknown write", get(), nil, errUnknown, WriteUnknown, Transient},

		// After (maybe) writing.
		{"reset", get(), nil, &net.OpError{Op: "read", Err: os.NewSyscallError("read", errUnknown)}, WroteRequest, Transient},
		{"broken pipe", get(), nil, &net.OpError{Op: "write", Err: os.NewSyscallError("write", errUnknown)}, WroteHeaders, Transient},
		{"EOF", get(), nil, io.EOF, WroteRequest, Transient},
		{"unexpected EOF", get(), nil, fmt.Errorf("x: %w", io.ErrUnexpectedEOF), WriteUnknown, Transient},
		{"closed", get(), nil, net.ErrClosed, WriteUnknown, Transient},
		{"deadline not the caller's", get(), nil, os.ErrDeadlineExceeded, WroteRequest, Transient},
		{"DeadlineExceeded not the caller's", get(), nil, context.DeadlineExceeded, WroteRequest, Transient},
		{"Canceled not the caller's", get(), nil, context.Canceled, WroteRequest, Transient},
		{"no request", nil, nil, errUnknown, WriteUnknown, Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Outcome{Request: tt.req, Response: tt.resp, Err: tt.err, Attempt: 1, Wrote: tt.wrote}
			if got := DefaultClassifier(o); got != tt.want {
				t.Errorf("DefaultClassifier(%v, wrote %d) = %v; want %v", tt.err, tt.wrote, got, tt.want)
			}
		})
	}
}

func TestErrAttemptTimeout(t *testing.T) {
	assert.ErrorIs(t, ErrAttemptTimeout, context.DeadlineExceeded)
	assert.ErrorIs(t, fmt.Errorf("x: %w", ErrAttemptTimeout), ErrAttemptTimeout)
	assert.NotErrorIs(t, context.DeadlineExceeded, ErrAttemptTimeout)
	var ne net.Error
	require.ErrorAs(t, ErrAttemptTimeout, &ne)
	assert.True(t, ne.Timeout())
	assert.Equal(t, "retry: attempt timed out", ErrAttemptTimeout.Error())
}

// traceAttempt sends req through rt once, tracing the write as the Transport
// does for requests that are unsafe to replay, and returns the Outcome.
// A response's body is closed when the test ends.
func traceAttempt(t *testing.T, rt http.RoundTripper, req *http.Request) Outcome {
	t.Helper()
	var mu sync.Mutex
	wrote := WroteNothing
	trace := &httptrace.ClientTrace{
		WroteHeaders: func() {
			mu.Lock()
			defer mu.Unlock()
			wrote = max(wrote, WroteHeaders)
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			wrote = WroteRequest
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	mu.Lock()
	defer mu.Unlock()
	return Outcome{Request: req, Response: resp, Err: err, Attempt: 1, Wrote: wrote}
}

// plainTransport returns a plain http.Transport whose idle connections are
// closed when the test ends.
func plainTransport(t *testing.T) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// quietTestServer returns an unstarted httptest server whose error log is
// discarded (TLS handshake failures are logged there), closed when the
// test ends.
func quietTestServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(srv.Close)
	return srv
}

// checkDefaultClass classifies o as it is and without its write state: the type
// of the error alone must give want too, unless wantUnknown differs.
func checkDefaultClass(t *testing.T, o Outcome, want, wantUnknown Class) {
	t.Helper()
	if got := DefaultClassifier(o); got != want {
		t.Errorf("DefaultClassifier(%v, wrote %d) = %v; want %v", o.Err, o.Wrote, got, want)
	}
	o.Wrote = WriteUnknown
	if got := DefaultClassifier(o); got != wantUnknown {
		t.Errorf("DefaultClassifier(%v, write unknown) = %v; want %v", o.Err, got, wantUnknown)
	}
}

func TestRealDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	req := httptest.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("x"))
	o := traceAttempt(t, plainTransport(t), req)
	require.Error(t, o.Err)
	opErr, ok := errors.AsType[*net.OpError](o.Err)
	require.True(t, ok, "error %v is not a *net.OpError", o.Err)
	require.Equal(t, "dial", opErr.Op)
	assert.Equal(t, WroteNothing, o.Wrote)
	checkDefaultClass(t, o, Unsent, Unsent)
}

// resetTestServer starts a server that reads each request, writes partial (if
// any) once wait is closed, and resets the connection: SO_LINGER 0 makes
// Close send an RST, not a FIN.
func resetTestServer(t *testing.T, partial string, wait <-chan struct{}) *httptest.Server {
	srv := quietTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
			t.Errorf("SetLinger: %v", err)
		}
		if partial != "" {
			if _, err := io.WriteString(conn, partial); err != nil {
				t.Errorf("Write: %v", err)
				return
			}
		}
		<-wait
	}))
	srv.Start()
	return srv
}

func TestRealConnectionReset(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	srv := resetTestServer(t, "", closed)

	req := httptest.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
	o := traceAttempt(t, plainTransport(t), req)
	opErr, ok := errors.AsType[*net.OpError](o.Err)
	require.True(t, ok, "error %v is not a *net.OpError", o.Err)
	require.Equal(t, "read", opErr.Op)
	require.Equal(t, WroteRequest, o.Wrote)
	checkDefaultClass(t, o, Transient, Transient)
}

func TestRealConnectionResetMidResponse(t *testing.T) {
	// The server resets the connection once the client has read the
	// status line. Linux reports the reset as ECONNRESET; some network
	// stacks (gVisor's) report a reset after data as an EOF, which
	// net/http turns into io.ErrUnexpectedEOF. Both are Transient.
	firstByte := make(chan struct{})
	var once sync.Once
	srv := resetTestServer(t, "HTTP/1.1 200 OK\r\n", firstByte)

	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { once.Do(func() { close(firstByte) }) },
	})
	req := httptest.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload")).WithContext(ctx)
	o := traceAttempt(t, plainTransport(t), req)
	once.Do(func() { close(firstByte) }) // never leave the handler waiting
	opErr, ok := errors.AsType[*net.OpError](o.Err)
	require.True(t, (ok && opErr.Op == "read") || errors.Is(o.Err, io.ErrUnexpectedEOF),
		"error %v is neither a read error nor an unexpected EOF", o.Err)
	require.Equal(t, WroteRequest, o.Wrote)
	checkDefaultClass(t, o, Transient, Transient)
}

func TestRealUntrustedCertificate(t *testing.T) {
	srv := quietTestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("handler reached over an unverified connection")
	}))
	srv.StartTLS()

	o := traceAttempt(t, plainTransport(t), httptest.NewRequest(http.MethodGet, srv.URL, nil))
	_, ok := errors.AsType[*tls.CertificateVerificationError](o.Err)
	require.True(t, ok, "error %v is not a *tls.CertificateVerificationError", o.Err)
	_, ok = errors.AsType[x509.UnknownAuthorityError](o.Err)
	assert.True(t, ok, "error %v does not wrap x509.UnknownAuthorityError", o.Err)
	checkDefaultClass(t, o, Permanent, Permanent)
}

func TestRealHostnameMismatch(t *testing.T) {
	srv := quietTestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("handler reached over an unverified connection")
	}))
	srv.StartTLS()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tr := plainTransport(t)
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, ServerName: "other.invalid"}

	o := traceAttempt(t, tr, httptest.NewRequest(http.MethodGet, srv.URL, nil))
	_, ok := errors.AsType[x509.HostnameError](o.Err)
	require.True(t, ok, "error %v does not wrap x509.HostnameError", o.Err)
	checkDefaultClass(t, o, Permanent, Permanent)
}

func TestRealTLSToPlainServer(t *testing.T) {
	srv := quietTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Start()
	httpsURL := "https://" + srv.Listener.Addr().String() + "/"

	t.Run("Transport", func(t *testing.T) {
		o := traceAttempt(t, plainTransport(t), httptest.NewRequest(http.MethodGet, httpsURL, nil))
		_, ok := errors.AsType[tls.RecordHeaderError](o.Err)
		require.True(t, ok, "error %v is not a tls.RecordHeaderError", o.Err)
		checkDefaultClass(t, o, Permanent, Permanent)
	})
	t.Run("Client", func(t *testing.T) {
		client := &http.Client{Transport: plainTransport(t)}
		req := httptest.NewRequest(http.MethodGet, httpsURL, nil)
		req.RequestURI = ""
		resp, err := client.Do(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, http.ErrSchemeMismatch)
		checkDefaultClass(t, Outcome{Request: req, Err: err, Attempt: 1, Wrote: WroteNothing}, Permanent, Permanent)
	})
}

func TestRealRedirectLoop(t *testing.T) {
	srv := quietTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	srv.Start()

	t.Run("default policy", func(t *testing.T) {
		client := &http.Client{Transport: plainTransport(t)}
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/loop", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.Error(t, err)
		require.NotNil(t, resp, "http.Client returns the last response with a CheckRedirect error")
		resp.Body.Close()
		_, ok := errors.AsType[*url.Error](err)
		require.True(t, ok, "error %v is not a *url.Error", err)
		checkDefaultClass(t, Outcome{Request: req, Response: resp, Err: err, Attempt: 1}, Permanent, Permanent)
	})
	t.Run("custom policy", func(t *testing.T) {
		errPolicy := errors.New("redirects are not followed")
		client := &http.Client{
			Transport:     plainTransport(t),
			CheckRedirect: func(*http.Request, []*http.Request) error { return errPolicy },
		}
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/loop", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.ErrorIs(t, err, errPolicy)
		require.NotNil(t, resp)
		resp.Body.Close()
		checkDefaultClass(t, Outcome{Request: req, Response: resp, Err: err, Attempt: 1}, Permanent, Permanent)
	})
}

func TestRealInvalidRequests(t *testing.T) {
	tests := []struct {
		name string
		req  func() *http.Request
	}{
		{"ftp scheme", func() *http.Request { return httptest.NewRequest(http.MethodGet, "ftp://127.0.0.1/file", nil) }},
		{"no host", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, "http:///path", nil)
			return r
		}},
		{"invalid header", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
			r.Header["Bad Name"] = []string{"x"}
			return r
		}},
		{"invalid method", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
			r.Method = "BAD METHOD"
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req()
			require.NotNil(t, req)
			o := traceAttempt(t, plainTransport(t), req)
			require.Error(t, o.Err)
			require.Equal(t, WroteNothing, o.Wrote)
			checkDefaultClass(t, o, Permanent, Permanent)
		})
	}
}

// startFakeDNS starts a DNS server on loopback UDP that answers every query
// with rcode and no records, and returns a dialer that resolves through
// it only.
func startFakeDNS(t *testing.T, rcode byte) *net.Dialer {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			// Header (12 bytes), then the question: a name of labels
			// ending with a zero, a type and a class.
			end := 12
			for end < n && buf[end] != 0 {
				end += 1 + int(buf[end])
			}
			end += 1 + 4
			if n < 12 || end > n {
				continue
			}
			msg := slices.Clone(buf[:end])
			msg[2] = 0x80 | buf[2]&0x01 // response, echoing recursion desired
			msg[3] = 0x80 | rcode       // recursion available
			msg[4], msg[5] = 0, 1       // one question
			clear(msg[6:12])            // no answer, authority or additional records
			pc.WriteTo(msg, addr)
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		<-done
	})
	return &net.Dialer{Resolver: &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", pc.LocalAddr().String())
		},
	}}
}

func TestRealDNS(t *testing.T) {
	const (
		rcodeServerFailure = 2
		rcodeNameError     = 3
	)
	tests := []struct {
		name      string
		rcode     byte
		want      Class
		wantFound bool
	}{
		{"NXDOMAIN", rcodeNameError, Permanent, true},
		{"SERVFAIL", rcodeServerFailure, Unsent, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := plainTransport(t)
			tr.DialContext = startFakeDNS(t, tt.rcode).DialContext
			o := traceAttempt(t, tr, httptest.NewRequest(http.MethodPost, "http://nonexistent.invalid/", strings.NewReader("x")))
			dnsErr, ok := errors.AsType[*net.DNSError](o.Err)
			require.True(t, ok, "error %v is not a *net.DNSError", o.Err)
			require.Equal(t, tt.wantFound, dnsErr.IsNotFound, "IsNotFound of %v", dnsErr)
			if !tt.wantFound {
				require.True(t, dnsErr.IsTemporary, "IsTemporary of %v", dnsErr)
			}
			checkDefaultClass(t, o, tt.want, tt.want)
		})
	}
}

func TestRealDNSSystemResolver(t *testing.T) {
	// The .invalid TLD never resolves (RFC 6761 §6.4). A resolver that
	// answers NXDOMAIN gives Permanent; a sandbox without one gives some
	// other DNS error, which is not what this test is about.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "http://nonexistent.invalid/", nil).WithContext(ctx)
	o := traceAttempt(t, plainTransport(t), req)
	dnsErr, ok := errors.AsType[*net.DNSError](o.Err)
	if !ok || !dnsErr.IsNotFound {
		t.Skipf("the system resolver did not answer NXDOMAIN for nonexistent.invalid: %v", o.Err)
	}
	checkDefaultClass(t, o, Permanent, Permanent)
}

func TestRealCallerCanceled(t *testing.T) {
	srv := quietTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client going away.
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	srv.Start()

	t.Run("before sending", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x")).WithContext(ctx)
		o := traceAttempt(t, plainTransport(t), req)
		require.ErrorIs(t, o.Err, context.Canceled)
		checkDefaultClass(t, o, Permanent, Permanent)
	})
	t.Run("after sending", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { cancel() },
		})
		req := httptest.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x")).WithContext(ctx)
		o := traceAttempt(t, plainTransport(t), req)
		require.ErrorIs(t, o.Err, context.Canceled)
		require.Equal(t, WroteRequest, o.Wrote)
		checkDefaultClass(t, o, Permanent, Permanent)
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		req := httptest.NewRequest(http.MethodGet, srv.URL, nil).WithContext(ctx)
		o := traceAttempt(t, plainTransport(t), req)
		require.ErrorIs(t, o.Err, context.DeadlineExceeded)
		checkDefaultClass(t, o, Permanent, Permanent)
	})
}

func TestRealAttemptTimeout(t *testing.T) {
	srv := quietTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	srv.Start()

	t.Run("after sending", func(t *testing.T) {
		// The attempt's timer firing, without waiting for one.
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { cancel(ErrAttemptTimeout) },
		})
		req := httptest.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x")).WithContext(ctx)
		o := traceAttempt(t, plainTransport(t), req)
		require.ErrorIs(t, o.Err, ErrAttemptTimeout)
		require.Equal(t, WroteRequest, o.Wrote)
		checkDefaultClass(t, o, Transient, Transient)
	})
	t.Run("before sending", func(t *testing.T) {
		ctx, cancel := context.WithDeadlineCause(context.Background(), time.Unix(0, 0), ErrAttemptTimeout)
		defer cancel()
		req := httptest.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x")).WithContext(ctx)
		o := traceAttempt(t, plainTransport(t), req)
		require.ErrorIs(t, o.Err, ErrAttemptTimeout)
		checkDefaultClass(t, o, Unsent, Transient)
	})
}

func TestRealResponseHeaderTimeout(t *testing.T) {
	// net/http's own timeout is a net.Error that also matches
	// context.DeadlineExceeded, yet it is not the caller's deadline.
	srv := quietTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	srv.Start()
	tr := plainTransport(t)
	tr.ResponseHeaderTimeout = time.Millisecond

	o := traceAttempt(t, tr, httptest.NewRequest(http.MethodGet, srv.URL, nil))
	require.ErrorIs(t, o.Err, context.DeadlineExceeded)
	ne, ok := errors.AsType[net.Error](o.Err)
	require.True(t, ok && ne.Timeout(), "error %v is not a net.Error timeout", o.Err)
	require.Equal(t, WroteRequest, o.Wrote)
	checkDefaultClass(t, o, Transient, Transient)
}

func TestRealHTTP2StreamError(t *testing.T) {
	// A handler that aborts makes the server reset the stream with
	// INTERNAL_ERROR: this checks that net/http's unexported HTTP/2 stream
	// error is reachable through h2StreamError, the way REFUSED_STREAM is
	// recognised.
	srv := quietTestServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	client := srv.Client()
	t.Cleanup(client.CloseIdleConnections)

	o := traceAttempt(t, client.Transport, httptest.NewRequest(http.MethodGet, srv.URL, nil))
	require.Error(t, o.Err)
	var se h2StreamError
	require.ErrorAs(t, o.Err, &se)
	assert.Equal(t, uint32(0x2), se.Code, "INTERNAL_ERROR")
	assert.False(t, refusedStream(o.Err))
	checkDefaultClass(t, o, Transient, Transient)
}
