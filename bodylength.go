package retry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
)

// checkContentLength refuses, before anything is sent, a request whose
// ContentLength its body contradicts where that can be known up front: a
// length with no body (net/http refuses it over HTTP/1.1 and sends no
// body over HTTP/2), a length below -1 (the only negative one with a
// meaning, unknown), or an in-memory body of another length (net/http
// would refuse it over HTTP/1.1 after sending the headers, and send it
// malformed over HTTP/2). No retry would change any of them. Other bodies
// are checked as they are read (lengthCheck, replayBody.checkLength).
func checkContentLength(req *http.Request) error {
	switch n := req.ContentLength; {
	case n < -1:
		return fmt.Errorf("retry: request ContentLength %d is negative (-1 means unknown)", n)
	case n != 0 && req.Body == nil:
		return fmt.Errorf("retry: request ContentLength is %d, but it has no Body", n)
	case n <= 0:
		return nil // no body, or a length net/http learns by reading
	}
	if n, ok := knownLength(req.Body); ok && n != req.ContentLength {
		return fmt.Errorf("retry: request body has %d bytes, but its ContentLength is %d", n, req.ContentLength)
	}
	return nil
}

// knownLength returns the length of an in-memory body, the kinds
// http.NewRequest knows.
func knownLength(body io.Reader) (int64, bool) {
	switch b := inMemory(body).(type) {
	case *bytes.Reader:
		return int64(b.Len()), true
	case *strings.Reader:
		return int64(b.Len()), true
	case *bytes.Buffer:
		return int64(b.Len()), true
	}
	return 0, false
}

// lengthError returns the error of a body that yielded n bytes (all of it
// when eof) against a declared ContentLength, or nil while it agrees.
func lengthError(n, declared int64, eof bool) error {
	switch {
	case n > declared:
		return fmt.Errorf("retry: request body is longer than its ContentLength %d", declared)
	case eof && n < declared:
		return fmt.Errorf("retry: request body ended after %d bytes, short of its ContentLength %d", n, declared)
	}
	return nil
}

// lengthCheck checks the bodies of a request with GetBody and a positive
// ContentLength as they are read, as replayBody checks the one it copies:
// a body that contradicts its length fails the call as the caller's error,
// where net/http's own report ("ContentLength=N with Body length M" over
// HTTP/1.1, a stream reset over HTTP/2) has no type to tell it from a lost
// connection, and would be retried. It is safe for concurrent use: the
// writer of an attempt may outlive it.
type lengthCheck struct {
	declared int64
	err      atomic.Pointer[error] // the first mismatch seen
}

// wrap returns rc, counted against the declared length.
func (c *lengthCheck) wrap(rc io.ReadCloser) io.ReadCloser {
	return &checkedBody{rc: rc, c: c}
}

// mismatch returns the error of the first body that contradicted the
// declared length, or nil.
func (c *lengthCheck) mismatch() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// checkedBody is one attempt's body under a lengthCheck.
type checkedBody struct {
	rc io.ReadCloser
	c  *lengthCheck
	n  int64
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if lerr := lengthError(b.n, b.c.declared, err == io.EOF); lerr != nil {
		b.c.err.CompareAndSwap(nil, &lerr)
	}
	return n, err
}

func (b *checkedBody) Close() error { return b.rc.Close() }

// The types io.NopCloser returns, which http.NewRequest wraps its bodies in.
var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(strings.NewReader("")))
)

// inMemory returns the reader inside body when body is io.NopCloser's
// wrapper (as net/http's own isKnownInMemoryReader looks through it), or
// body itself.
func inMemory(body io.Reader) io.Reader {
	if t := reflect.TypeOf(body); t == nopCloserType || t == nopCloserWriterToType {
		if r, ok := reflect.ValueOf(body).Field(0).Interface().(io.Reader); ok {
			return r
		}
	}
	return body
}
