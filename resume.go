package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultResumes is how many times the body of one response is resumed
// by default. A long download through a proxy or balancer that cuts
// connections every so often (an idle or age limit, a GOAWAY on each
// deploy) breaks more than once or twice and still finishes; a body that
// breaks at every read gives up after ten round trips, each of which the
// Budget charges as a retry.
const DefaultResumes = 10

// Errors of a body that broke and whose resume the server answered with
// something that cannot be spliced: the Read fails with a *ResumeError
// that wraps one of them, and the break.
var (
	// ErrResourceChanged: the server answered the resume with the whole
	// resource under another validator, or with one that differs.
	ErrResourceChanged = errors.New("the resource changed")
	// ErrRangeIgnored: the server answered the resume with the whole
	// resource, under the same validator: it ignores Range.
	ErrRangeIgnored = errors.New("the server ignored the range")
	// ErrBadRange: the server answered with a part that is not the rest
	// of the body (its Content-Range starts elsewhere, or the length
	// differs), or with more bytes than the resource has.
	ErrBadRange = errors.New("the part is not the rest of the body")
)

// ResumeError is the error of a Read of a response body that broke and
// could not be resumed: Reason says why (ErrResourceChanged,
// ErrRangeIgnored, ErrBadRange, or the status the resume was refused
// with), and Err is what broke the body.
type ResumeError struct {
	Offset int64 // the bytes read before the break
	Reason error
	Err    error
}

func (e *ResumeError) Error() string {
	return fmt.Sprintf("retry: body broke at byte %d (%v) and was not resumed: %v", e.Offset, e.Err, e.Reason)
}

func (e *ResumeError) Unwrap() []error { return []error{e.Reason, e.Err} }

// ResumeEvent is what Transport.OnResume is told of a resume: the body of
// Request's response broke at Offset with Cause, and the Resume-th resume
// of it, after a wait of Wait, went on with the rest (Err nil) or failed
// with Err.
type ResumeEvent struct {
	Request *http.Request
	Resume  int
	Offset  int64
	Cause   error
	Wait    time.Duration
	Err     error
}

// resumable returns resp's body made resumable when the call and the
// response allow it: a GET answered 200 with a strong validator, not a
// range the caller asked for, not encoded or decoded on the way, not
// multipart/byteranges; otherwise resp as it is.
func (r *roundTrip) resumable(resp *http.Response) *http.Response {
	if r.s.resumes <= 0 || resp == nil || resp.StatusCode != http.StatusOK || r.req.Method != http.MethodGet ||
		r.req.Header.Get("Range") != "" || resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 ||
		resp.Uncompressed || resp.Header.Get("Content-Encoding") != "" ||
		strings.EqualFold(resp.Header.Get("Accept-Ranges"), "none") {
		return resp
	}
	v := validatorOf(resp.Header)
	if v == "" {
		return resp
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "multipart/byteranges" {
		return resp
	}
	resp.Body = &resumeBody{s: r.s, req: r.req, body: resp.Body, total: resp.ContentLength, validator: v,
		etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified")}
	return resp
}

// validatorOf returns the validator an If-Range may carry for a
// response with header h (RFC 9110, 13.1.5): its ETag when strong, else
// its Last-Modified when that is strong, a second or more before its Date
// (8.8.2.2); "" when it has neither.
func validatorOf(h http.Header) string {
	if etag := h.Get("ETag"); etag != "" {
		if strings.HasPrefix(etag, "W/") || len(etag) < 2 || etag[0] != '"' || etag[len(etag)-1] != '"' {
			return ""
		}
		return etag
	}
	if h.Get("Last-Modified") == "" {
		return ""
	}
	lm, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		return ""
	}
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil || date.Sub(lm) < time.Second {
		return ""
	}
	return h.Get("Last-Modified")
}

// resumeBody is the body of a response that a broken read resumes: the
// rest is asked for with Range and If-Range, and its bytes follow the
// ones already read, after checks that they are the rest of the same
// representation.
type resumeBody struct {
	s            *settings     // the call's
	req          *http.Request // the call's, with the Transport's key
	total        int64         // the representation's length; -1 when unknown
	validator    string        // the If-Range value
	etag         string        // the 200's ETag, "" if none
	lastModified string        // the 200's Last-Modified, "" if none

	offset  int64 // the bytes handed to the caller
	resumes int
	streak  int // resumes since the last byte read
	prev    time.Duration
	broken  error // a break to resume at the next Read
	err     error // sticky: the body is done

	mu     sync.Mutex // guards body, closed and ctx against Close
	body   io.ReadCloser
	closed bool
	// ctx is the resumes' context, the call's until Close ends it: a
	// Read waiting for a resume returns when the body is closed.
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *resumeBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.broken != nil {
		if err := b.resume(b.broken); err != nil {
			b.err = err
			return 0, err
		}
		b.broken = nil
	}
	b.mu.Lock()
	body := b.body
	b.mu.Unlock()
	if b.total >= 0 && int64(len(p)) > b.total-b.offset {
		if b.offset >= b.total && len(p) > 0 {
			return b.end(body)
		}
		p = p[:b.total-b.offset] // a part never yields past the end
	}
	n, err := body.Read(p)
	b.offset += int64(n)
	if n > 0 {
		b.streak = 0
	}
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF && (b.total < 0 || b.offset == b.total):
		b.err = io.EOF
		return n, io.EOF
	case err == io.EOF:
		err = io.ErrUnexpectedEOF // a part shorter than it said
	}
	if !b.worthResuming() {
		b.err = err
		return n, err
	}
	if n > 0 {
		b.broken = err // the bytes first; the resume at the next Read
		return n, nil
	}
	if err := b.resume(err); err != nil {
		b.err = err
		return 0, err
	}
	return b.Read(p)
}

// end reads body once all of the representation is read: it must end
// there. Reading its EOF, rather than stopping short of it, lets net/http
// reuse the connection; a byte more is not the resource's.
func (b *resumeBody) end(body io.Reader) (int, error) {
	var one [1]byte
	n, err := body.Read(one[:])
	switch {
	case n > 0:
		b.err = &ResumeError{Offset: b.offset, Reason: ErrBadRange, Err: errors.New("retry: the body is longer than the resource")}
	case err == nil:
		return 0, nil
	default:
		b.err = io.EOF // every byte is in: whatever ends the body ends it
	}
	return 0, b.err
}

// worthResuming reports whether a failed read may be resumed: not when
// the caller's context ended or the caller closed the body.
func (b *resumeBody) worthResuming() bool {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	return !closed && b.req.Context().Err() == nil
}

// errResumeClosed is splice's error when the body was closed during the
// resume: the next turn of resume's loop sees it closed.
var errResumeClosed = errors.New("retry: body closed")

// resume asks for the rest of the body after a break, cause, and makes it
// the body read from; or returns the error the Read fails with: cause
// itself once the resumes are spent or the server cannot be asked, a
// *ResumeError when its answer cannot be spliced.
func (b *resumeBody) resume(cause error) error {
	for {
		if b.resumes >= b.s.resumes {
			return cause
		}
		b.resumes++
		b.streak++
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return cause
		}
		if b.ctx == nil {
			b.ctx, b.cancel = context.WithCancel(b.req.Context())
		}
		ctx := b.ctx
		b.mu.Unlock()
		var wait time.Duration
		if b.streak > 1 { // a resume after bytes read goes at once
			wait = max(b.s.backoff.Delay(b.streak-1, b.prev, b.s.rand()), 0)
			if err := b.s.sleep(ctx, wait); err != nil {
				return cause
			}
			b.prev = wait
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return cause
		}
		b.body.Close()
		req := b.req.Clone(ctx)
		b.mu.Unlock()
		req.Header.Set("Range", "bytes="+strconv.FormatInt(b.offset, 10)+"-")
		req.Header.Set("If-Range", b.validator)
		resp, err := b.send(req)
		if err == nil {
			err = b.splice(resp)
		}
		var rerr *ResumeError
		if errors.As(err, &rerr) && rerr.Err == nil {
			rerr.Err = cause
		}
		if h := b.s.onResume; h != nil {
			h(ResumeEvent{Request: b.req, Resume: b.resumes, Offset: b.offset, Cause: cause, Wait: wait, Err: err})
		}
		var gave *Error
		switch {
		case err == nil || rerr != nil:
			return err
		case errors.As(err, &gave) && gave.Attempts == 0:
			// A gate refused it (the Budget, the Breaker, a Pacer turn
			// past the deadline): it would refuse the next one too.
			return cause
		}
		// A resume that failed on the way (its connection, or a 5xx or
		// 429): another, if any are left; the Read fails with the break
		// itself when none are.
	}
}

// send sends req, a resume, as a retry of the call is sent: a Pacer turn,
// the Breaker, BeforeAttempt and the Budget (charged as a transient
// retry), then the base transport; its outcome goes back to the Pacer and
// the Breaker. It is no attempt of the call, which has ended: the call's
// hooks are not told of it, and it is not retried but resumed again.
func (b *resumeBody) send(req *http.Request) (*http.Response, error) {
	s := *b.s
	s.maxAttempts, s.hedge = 1, NoHedge
	s.onRetry, s.onGiveUp, s.onDone = nil, nil, nil
	r := roundTrip{s: &s, req: req, safe: true, rounds: 1, retried: Transient}
	resp, err := r.run()
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusPartialContent || resp.StatusCode == http.StatusOK:
		return resp, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		b.s.drain(resp.Body, drainLimit, drainTimeout)
		return nil, fmt.Errorf("retry: the resume was answered %s", resp.Status)
	}
	b.s.drain(resp.Body, drainLimit, drainTimeout)
	return nil, &ResumeError{Offset: b.offset, Reason: fmt.Errorf("the resume was answered %s", resp.Status)}
}

// splice makes resp, the answer to a resume, the body read from, if it
// is the rest of the same representation; otherwise it closes it and
// says why not.
func (b *resumeBody) splice(resp *http.Response) error {
	bad := func(reason error) error {
		resp.Body.Close()
		return &ResumeError{Offset: b.offset, Reason: reason}
	}
	if resp.StatusCode == http.StatusOK {
		if b.etag != "" && resp.Header.Get("ETag") == b.etag ||
			b.etag == "" && resp.Header.Get("Last-Modified") == b.lastModified {
			return bad(ErrRangeIgnored)
		}
		return bad(ErrResourceChanged)
	}
	if b.etag != "" && resp.Header.Get("ETag") != b.etag ||
		b.etag == "" && resp.Header.Get("Last-Modified") != b.lastModified {
		return bad(ErrResourceChanged)
	}
	if resp.Header.Get("Content-Encoding") != "" || resp.Uncompressed {
		return bad(ErrBadRange)
	}
	first, last, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
	switch {
	case !ok, first != b.offset, b.total >= 0 && total != b.total,
		total >= 0 && last != total-1,
		resp.ContentLength >= 0 && resp.ContentLength != last-first+1:
		return bad(ErrBadRange)
	}
	if b.total < 0 {
		b.total = total
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		resp.Body.Close()
		return errResumeClosed
	}
	b.body = resp.Body
	return nil
}

// parseContentRange parses a Content-Range of bytes: "bytes first-last/
// total", total -1 when "*".
func parseContentRange(v string) (first, last, total int64, ok bool) {
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	span, size, found := strings.Cut(rest, "/")
	a, z, found2 := strings.Cut(span, "-")
	if !found || !found2 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	first, err1 = strconv.ParseInt(a, 10, 64)
	last, err2 = strconv.ParseInt(z, 10, 64)
	total = -1
	if size != "*" {
		total, err3 = strconv.ParseInt(size, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || total < -1 || total >= 0 && last >= total {
		return 0, 0, 0, false
	}
	return first, last, total, true
}

func (b *resumeBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.cancel != nil {
		b.cancel()
	}
	return b.body.Close()
}
