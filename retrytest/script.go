package retrytest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"strconv"
	"sync"
	"syscall"
)

// Step is one answer of a [Script] to an attempt. The request's body has
// been read (into Attempt.Body) and closed when the step runs.
type Step func(req *http.Request) (*http.Response, error)

// Respond answers with status code, the given header fields (name, value,
// name, value, ...), and the body "status <code>".
func Respond(code int, header ...string) Step {
	return func(req *http.Request) (*http.Response, error) {
		h := make(http.Header)
		for i := 0; i+1 < len(header); i += 2 {
			h.Add(header[i], header[i+1])
		}
		body := "status " + strconv.Itoa(code)
		return &http.Response{
			Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(bytes.NewReader([]byte(body))), ContentLength: int64(len(body)),
			Request: req,
		}, nil
	}
}

// Unsent fails the attempt before any byte of it is written, as a refused
// dial does: the request's [httptrace.ClientTrace] sees a connection asked
// for and none handed over, which proves the request unsent. A nil err
// means a refused connection.
func Unsent(err error) Step {
	if err == nil {
		err = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return func(req *http.Request) (*http.Response, error) {
		if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.GetConn != nil {
			tr.GetConn(req.URL.Host)
		}
		return nil, err
	}
}

// Written fails the attempt after the whole request was written, as a
// connection reset before the answer does: the server may have executed
// it. The request's trace sees a connection, the headers and the request
// written. A nil err means a connection reset by the peer.
func Written(err error) Step {
	if err == nil {
		err = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return func(req *http.Request) (*http.Response, error) {
		wrote(req, true)
		return nil, err
	}
}

// wrote tells req's trace, if any, that a connection was handed to it and
// its headers written, and the whole request when all is true.
func wrote(req *http.Request, all bool) {
	tr := httptrace.ContextClientTrace(req.Context())
	if tr == nil {
		return
	}
	if tr.GetConn != nil {
		tr.GetConn(req.URL.Host)
	}
	if tr.GotConn != nil {
		tr.GotConn(httptrace.GotConnInfo{})
	}
	if tr.WroteHeaders != nil {
		tr.WroteHeaders()
	}
	if all && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
}

// Attempt is what a [Script] recorded of one attempt.
type Attempt struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte // the whole body the attempt sent
	// BodyErr is the error reading the body ended with, if not EOF.
	BodyErr error
}

// Script is an [http.RoundTripper] that answers attempt i with its step i,
// the last step repeating, and records every attempt. Give it to a
// Transport as its base. It is safe for concurrent use.
type Script struct {
	mu       sync.Mutex
	steps    []Step
	attempts []Attempt
}

// NewScript returns a Script of steps; with none, every attempt is
// answered 200.
func NewScript(steps ...Step) *Script {
	if len(steps) == 0 {
		steps = []Step{Respond(http.StatusOK)}
	}
	return &Script{steps: steps}
}

// RoundTrip reads and closes the request's body, records the attempt and
// answers it with the next step.
func (s *Script) RoundTrip(req *http.Request) (*http.Response, error) {
	a := Attempt{Method: req.Method, URL: req.URL.String(), Header: req.Header.Clone()}
	if req.Body != nil {
		a.Body, a.BodyErr = io.ReadAll(req.Body)
		req.Body.Close()
	}
	s.mu.Lock()
	step := s.steps[min(len(s.attempts), len(s.steps)-1)]
	s.attempts = append(s.attempts, a)
	s.mu.Unlock()
	return step(req)
}

// Attempts returns the attempts made so far, in order.
func (s *Script) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
}

// RefusedStream fails the attempt as an HTTP/2 server's REFUSED_STREAM
// reset does (RFC 9113 §8.7: the stream was not processed), with a
// [StreamError] that net/http's and golang.org/x/net/http2's stream error
// types match with errors.As, as net/http's own does.
func RefusedStream() Step {
	return func(req *http.Request) (*http.Response, error) {
		wrote(req, false)
		return nil, StreamError{StreamID: 1, Code: refusedStreamCode}
	}
}

// refusedStreamCode is HTTP/2's REFUSED_STREAM error code (RFC 9113 §7).
const refusedStreamCode = 0x7

// StreamError is an HTTP/2 stream reset, shaped as net/http's bundled
// StreamError: StreamID, Code (an RFC 9113 error code) and Cause.
type StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e StreamError) Error() string {
	return "stream error: stream ID " + strconv.FormatUint(uint64(e.StreamID), 10) +
		"; code " + strconv.FormatUint(uint64(e.Code), 10)
}

// As fills target when it points to a struct with the same fields, as
// net/http's StreamError does for golang.org/x/net/http2's, so that code
// matching either type matches this one.
func (e StreamError) As(target any) bool {
	dst := reflect.ValueOf(target)
	if dst.Kind() != reflect.Pointer || dst.IsNil() || dst.Elem().Kind() != reflect.Struct {
		return false
	}
	dst = dst.Elem()
	src := reflect.ValueOf(e)
	if dst.NumField() != src.NumField() {
		return false
	}
	for i := range src.NumField() {
		sf := src.Type().Field(i)
		df, ok := dst.Type().FieldByName(sf.Name)
		if !ok || !df.IsExported() || !sf.Type.ConvertibleTo(df.Type) {
			return false
		}
	}
	for i := range src.NumField() {
		name := src.Type().Field(i).Name
		dst.FieldByName(name).Set(src.Field(i).Convert(dst.FieldByName(name).Type()))
	}
	return true
}

// GoAway fails the attempt as net/http's HTTP/2 client does when the
// server sent GOAWAY and closed the connection after the request was
// written, and net/http could not replay it by itself (a body it cannot
// rewind): an untyped error, after which the server may have processed
// the request.
func GoAway() Step {
	return Written(errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=""`))
}
