package retry

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// errBodyNotReplayable is what a stale attempt's body reader returns once the
// bytes it would need were dropped because the body outgrew MaxBufferedBody.
var errBodyNotReplayable = errors.New("retry: request body outgrew MaxBufferedBody and cannot be replayed")

// errBodyFinished is returned by GetBody on an attempt's request after the
// RoundTrip that made it has returned.
var errBodyFinished = errors.New("retry: request body requested after RoundTrip returned")

const (
	// minChunk and maxChunk bound the pieces a body is buffered in when its
	// length is unknown: small bodies stay small, large ones are never
	// copied to grow (append would copy, and briefly hold twice the bytes).
	minChunk = 512
	maxChunk = 64 << 10
)

// replayBody hands every attempt a reader that yields exactly the caller's
// body bytes. It reads the caller's body lazily: the first attempt streams
// it while the bytes are copied aside; a later attempt replays the copy and
// then goes on reading the caller's body where the last reader stopped. So a
// retry after an early response (a 503 sent before the upload finished)
// still sends the whole body, and the first byte leaves as soon as the
// caller's reader yields it.
//
// Readers of different attempts may run at once (net/http's write loop can
// outlive its RoundTrip); mu serialises them, and every byte read from the
// source is recorded before any reader sees it, so all readers agree.
type replayBody struct {
	src io.ReadCloser
	max int64 // largest number of bytes kept for replay

	mu      sync.Mutex
	chunks  [][]byte
	pos     int64 // bytes read from src so far
	dropped bool  // the copy exceeded max and was released
	eof     bool
	err     error // sticky non-EOF error from src
	open    int   // readers handed out and not yet closed
	done    bool  // RoundTrip returned: no further readers

	closeOnce sync.Once
}

// newReplayBody prepares the caller's body for replay. contentLength sizes
// the copy when it is known; a body announced larger than max is never
// copied and can be replayed only while none of it has been read.
func newReplayBody(src io.ReadCloser, contentLength, max int64) *replayBody {
	b := &replayBody{src: src, max: max}
	switch {
	case contentLength > max:
		b.dropped = true
	case contentLength > 0:
		b.chunks = [][]byte{make([]byte, 0, contentLength)}
	}
	return b
}

// reader returns a new reader positioned at the start of the body.
func (b *replayBody) reader() (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil, errBodyFinished
	}
	b.open++
	return &replayReader{b: b}, nil
}

// getBody is installed as each attempt's [http.Request.GetBody], so the base
// transport's own rewinds (HTTP/2 GOAWAY, 307 and 308 redirects) replay too.
func (b *replayBody) getBody() (io.ReadCloser, error) { return b.reader() }

// replayable reports whether another attempt could send the whole body.
func (b *replayBody) replayable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return false // the caller's reader failed; it would fail again
	}
	return !b.dropped || b.pos == 0
}

// finish records that no further reader will be made, and closes the
// caller's body once every reader handed out has been closed.
func (b *replayBody) finish() {
	b.mu.Lock()
	b.done = true
	last := b.open == 0
	if last {
		b.release()
	}
	b.mu.Unlock()
	if last {
		b.closeSource()
	}
}

// release drops the copy once no reader can need it: RoundTrip returned
// and every reader was closed. The response keeps the last attempt's
// request, whose GetBody keeps b, so without this a caller holding the
// response would hold the whole copy too. b.mu must be held.
func (b *replayBody) release() {
	b.chunks, b.dropped = nil, true
}

func (b *replayBody) closeSource() {
	b.closeOnce.Do(func() { b.src.Close() })
}

// read serves r from the copy while it is behind the source, and from the
// source, recording what it reads, once it has caught up.
func (b *replayBody) read(r *replayReader, p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.off < b.pos {
		if b.dropped {
			return 0, errBodyNotReplayable
		}
		return b.copyAt(r, p), nil
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.src.Read(p)
	if n > 0 {
		b.record(p[:n])
		b.pos += int64(n)
		r.off += int64(n)
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

// copyAt copies recorded bytes from r's offset into p.
func (b *replayBody) copyAt(r *replayReader, p []byte) int {
	off := r.off
	n := 0
	for _, c := range b.chunks {
		if off >= int64(len(c)) {
			off -= int64(len(c))
			continue
		}
		k := copy(p[n:], c[off:])
		n += k
		off = 0
		if n == len(p) {
			break
		}
	}
	r.off += int64(n)
	return n
}

// record keeps p for replay, or drops the whole copy once it would exceed max.
func (b *replayBody) record(p []byte) {
	if b.dropped {
		return
	}
	if b.pos+int64(len(p)) > b.max {
		b.chunks = nil
		b.dropped = true
		return
	}
	for len(p) > 0 {
		var last []byte
		if len(b.chunks) > 0 {
			last = b.chunks[len(b.chunks)-1]
		}
		if len(last) == cap(last) {
			size := int64(minChunk)
			if b.pos > size {
				size = b.pos // geometric growth, no copying
			}
			size = min(size, maxChunk, b.max-b.pos)
			size = max(size, int64(len(p)))
			b.chunks = append(b.chunks, make([]byte, 0, size))
			last = b.chunks[len(b.chunks)-1]
		}
		k := min(len(p), cap(last)-len(last))
		b.chunks[len(b.chunks)-1] = append(last, p[:k]...)
		p = p[k:]
	}
}

// replayReader is one attempt's view of a replayBody.
type replayReader struct {
	b      *replayBody
	off    int64
	closed bool // guarded by b.mu
}

func (r *replayReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return r.b.read(r, p)
}

// Close releases r. The caller's body is closed when the last reader of a
// finished RoundTrip is, so a base transport still writing an earlier
// attempt never has the body closed under it.
func (r *replayReader) Close() error {
	b := r.b
	b.mu.Lock()
	if r.closed {
		b.mu.Unlock()
		return nil
	}
	r.closed = true
	b.open--
	last := b.done && b.open == 0
	if last {
		b.release()
	}
	b.mu.Unlock()
	if last {
		b.closeSource()
	}
	return nil
}

// drain reads and discards up to limit bytes of a response body that will
// not be returned, then closes it, so its connection can be reused
// (net/http reuses a connection only after its body was read to EOF). A body
// that trickles is closed after timeout; one longer than limit is closed
// unread, which costs its connection but bounds the work.
func drain(body io.ReadCloser, limit int64, timeout time.Duration) {
	if body == nil || body == http.NoBody {
		return
	}
	stop := time.AfterFunc(timeout, func() { body.Close() })
	_, _ = io.CopyN(io.Discard, body, limit)
	if stop.Stop() {
		body.Close()
	}
}
