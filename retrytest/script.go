package retrytest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
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
		if tr := httptrace.ContextClientTrace(req.Context()); tr != nil {
			if tr.GetConn != nil {
				tr.GetConn(req.URL.Host)
			}
			if tr.GotConn != nil {
				tr.GotConn(httptrace.GotConnInfo{})
			}
			if tr.WroteHeaders != nil {
				tr.WroteHeaders()
			}
			if tr.WroteRequest != nil {
				tr.WroteRequest(httptrace.WroteRequestInfo{})
			}
		}
		return nil, err
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
