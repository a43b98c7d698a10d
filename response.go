package retry

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"time"
)

// drainLimit is how much of a discarded response body is read so that its
// connection can be reused, and drainTimeout bounds the time spent on it.
const (
	drainLimit   = 64 << 10
	drainTimeout = time.Second
)

// DefaultPeekLimit is how many bytes [PeekBody] reads when its limit is not
// positive.
const DefaultPeekLimit = 64 << 10

// PeekBody returns up to limit bytes from the start of resp.Body (the first
// bytes a reader of resp.Body would get next), or [DefaultPeekLimit] bytes
// when limit <= 0, and puts them back: afterwards resp.Body yields every
// byte of the original body, prefix and rest, followed by the original's
// final error, and closing it closes the original. The returned slice is a
// copy, fewer than limit bytes long only when the body is shorter or
// reading it failed.
//
// PeekBody may be called again, by another classifier of a [Chain]: it
// recognises its own wrapper, returns the prefix already read and reads
// more only when the new limit is larger.
//
// A read error other than [io.EOF] is returned with the bytes read before
// it; the body is restored all the same, and its reader gets the same
// error after those bytes (and then whatever the original body returns
// next). A nil resp, a nil body and [http.NoBody] give
// nil, nil. So does a body that can be written to (that of a 101 Switching
// Protocols response): it is a connection, not content, and it is left
// alone.
//
// Like the body it wraps, the restored body is not safe for concurrent use.
func PeekBody(resp *http.Response, limit int64) ([]byte, error) {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		return nil, nil
	}
	if _, ok := resp.Body.(io.Writer); ok {
		return nil, nil // a hijacked stream: reading would wait for the peer
	}
	if limit <= 0 {
		limit = DefaultPeekLimit
	}
	pb, ok := resp.Body.(*peekedBody)
	if !ok {
		pb = &peekedBody{rc: resp.Body}
		resp.Body = pb
	}
	return pb.peek(limit)
}

// peekedBody is a response body with a prefix already read from rc and
// held in buf; its reader gets buf[off:] first, then the error rc returned
// after it, if any, then whatever rc returns next.
type peekedBody struct {
	rc     io.ReadCloser
	buf    []byte
	off    int   // bytes of buf already read by the caller
	err    error // rc's error after buf, returned once buf is read
	closed bool
}

// maxEmptyReads is how many (0, nil) reads in a row peek tolerates before
// giving up with [io.ErrNoProgress], as bufio.Reader does.
const maxEmptyReads = 100

func (b *peekedBody) peek(limit int64) ([]byte, error) {
	emptyReads := 0
	for int64(len(b.buf)-b.off) < limit && b.err == nil && !b.closed {
		unread := len(b.buf) - b.off
		missing := limit - int64(unread) // > 0, and no overflow
		if len(b.buf) == cap(b.buf) {
			// Grow geometrically, never past limit: a huge limit on a
			// short body costs only what the body holds.
			nb := make([]byte, unread, int64(unread)+min(missing, max(512, int64(cap(b.buf)))))
			copy(nb, b.buf[b.off:])
			b.buf, b.off = nb, 0
		}
		room := b.buf[len(b.buf):cap(b.buf)]
		if missing < int64(len(room)) {
			room = room[:missing]
		}
		n, err := b.rc.Read(room)
		b.buf = b.buf[:len(b.buf)+n]
		if err != nil {
			b.err = err
		}
		if n == 0 && err == nil {
			if emptyReads++; emptyReads >= maxEmptyReads {
				b.err = io.ErrNoProgress
			}
		} else {
			emptyReads = 0
		}
	}
	end := len(b.buf)
	if int64(end-b.off) > limit {
		end = b.off + int(limit)
	}
	p := slices.Clone(b.buf[b.off:end])
	if b.err != nil && b.err != io.EOF && end == len(b.buf) {
		return p, b.err
	}
	return p, nil
}

// Read returns the peeked prefix, then reads the rest of the original body.
func (b *peekedBody) Read(p []byte) (int, error) {
	if b.off < len(b.buf) {
		n := copy(p, b.buf[b.off:])
		b.off += n
		if b.off == len(b.buf) {
			b.buf, b.off = nil, 0 // let a long body stream without holding the prefix
		}
		return n, nil
	}
	if b.err != nil && !b.closed {
		// Once, as the original returned it; the original decides what
		// follows.
		err := b.err
		b.err = nil
		return 0, err
	}
	return b.rc.Read(p)
}

// Close closes the original body.
func (b *peekedBody) Close() error {
	b.closed = true
	b.buf, b.off = nil, 0
	return b.rc.Close()
}

// keep reads the body of a response that may yet be returned into memory,
// whole, up to limit bytes and within timeout, and closes it, so that its
// connection is reused as after drain. It returns resp with the body in
// memory, or nil (resp closed) when the body was longer or slower than
// that.
func (s *settings) keep(resp *http.Response, limit int64, timeout time.Duration) *http.Response {
	body := resp.Body
	if body == nil || body == http.NoBody {
		return resp
	}
	t := s.afterFunc(timeout, func() { body.Close() })
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	t.stop()
	body.Close()
	if err != nil || int64(len(b)) > limit {
		return nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// drain reads and discards up to limit bytes of a response body that will
// not be returned, then closes it, so its connection can be reused
// (net/http reuses a connection only after its body was read to EOF). A body
// that trickles is closed after timeout; one longer than limit is closed
// unread, which costs its connection but bounds the work.
func (s *settings) drain(body io.ReadCloser, limit int64, timeout time.Duration) {
	if body == nil || body == http.NoBody {
		return
	}
	t := s.afterFunc(timeout, func() { body.Close() })
	_, _ = io.CopyN(io.Discard, body, limit)
	if t.stop() {
		body.Close()
	}
}
