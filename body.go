package retry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// errBodyNotReplayable is what a reader returns once the bytes it would
// need were dropped because the body outgrew MaxBufferedBody.
var errBodyNotReplayable = errors.New("retry: request body outgrew MaxBufferedBody and cannot be replayed")

// errBodyFinished is returned by GetBody on an attempt's request, and by
// the first Read of a reader it made, after the RoundTrip that made it has
// returned and no reader holds the caller's body open.
var errBodyFinished = errors.New("retry: request body requested after RoundTrip returned")

// errBodySuperseded is what a reader of an earlier attempt returns once a
// retry was decided: only the current attempt reads the caller's body.
var errBodySuperseded = errors.New("retry: request body of an attempt that was superseded by a retry")

// errBodyClosed is what a reader returns after its Close.
var errBodyClosed = errors.New("retry: read from a closed request body")

const (
	// minChunk and maxChunk bound the pieces a body is buffered in: small
	// bodies stay small, large ones are never copied to grow (append
	// would copy, and briefly hold twice the bytes).
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
// Readers of different attempts may run at once: net/http's writer of an
// attempt can outlive its RoundTrip. The rules that keep them apart:
//
//   - No lock is held while the caller's body is read, so Close, a new
//     reader and the end of RoundTrip never wait for a caller's reader that
//     blocks (a paused io.Pipe). One reader at a time reads the source;
//     every byte read is recorded before any reader sees it, so all
//     readers agree, and a reader that needs bytes not yet read waits for
//     the read in flight, or its own Close.
//   - Once a retry is decided (retire), the readers of earlier attempts are
//     cut off: they no longer read, so they cannot read the body past
//     MaxBufferedBody after the retry was found possible, and they do not
//     hold the caller's body open.
//   - The caller's body is closed when RoundTrip has returned and every
//     reader of the last attempt that counts is closed. An attempt's own
//     body counts from the start (the base transport must close it); one
//     made by GetBody counts once it is read, since net/http may make one
//     and drop it unread and unclosed (a replay that found no connection).
type replayBody struct {
	src      io.ReadCloser
	max      int64 // largest number of bytes kept for replay
	declared int64 // the caller's ContentLength when positive; else unknown

	mu         sync.Mutex
	wake       sync.Cond // signalled when a read of src ends or a reader closes
	chunks     []*chunk  // the copy, from the chunk pools (see chunkpool.go)
	pos        int64     // bytes read from src so far
	dropped    bool      // the copy exceeded max and was released
	eof        bool
	err        error // sticky non-EOF error from src
	lengthErr  error // src's length contradicts declared
	reading    bool  // a reader is in src.Read, without mu
	readingLen int   // the length of the buffer that read fills
	gen        int   // the current attempt's generation: readers of older ones are cut off
	open       int   // counting readers of gen not yet closed
	done       bool  // RoundTrip returned: no further readers

	closeOnce sync.Once
	stopAbort func() bool // unregisters abort from the caller's context; guarded by mu
}

// abortOn closes the caller's body when ctx, the caller's, is done: a
// read of it that blocks (a paused io.Pipe) then ends, and with it the
// base transport's writer, which net/http's HTTP/1.1 client waits for
// before RoundTrip returns. It must be called before any reader is made.
func (b *replayBody) abortOn(ctx context.Context) {
	if ctx.Done() == nil {
		return // never done
	}
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		if b.err == nil && !b.eof {
			b.err = fmt.Errorf("retry: request body abandoned: %w", context.Cause(ctx))
		}
		b.wake.Broadcast()
		b.mu.Unlock()
		b.closeSource()
	})
	// Under the lock: a context already done runs the function at once,
	// on a goroutine of its own, which reads stopAbort.
	b.mu.Lock()
	b.stopAbort = stop
	b.mu.Unlock()
}

// closeSource closes the caller's body, once. b.mu must not be held.
func (b *replayBody) closeSource() {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		stop := b.stopAbort
		b.mu.Unlock()
		if stop != nil {
			stop()
		}
		b.src.Close()
	})
}

// newReplayBody prepares the caller's body for replay. A body announced
// larger than max is never copied and can be replayed only while none of it
// has been read. The copy grows as bytes arrive, whatever contentLength
// says, so a large announcement costs nothing up front.
func newReplayBody(src io.ReadCloser, contentLength, max int64) *replayBody {
	b := &replayBody{src: src, max: max, declared: contentLength}
	b.wake.L = &b.mu
	if contentLength > max {
		b.dropped = true
	}
	return b
}

// reader returns a new reader positioned at the start of the body, of the
// current attempt. counted says whether it holds the caller's body open
// from now on, or only once it is read.
func (b *replayBody) reader(counted bool) (*replayReader, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil, errBodyFinished
	}
	if counted {
		b.open++
	}
	return &replayReader{b: b, gen: b.gen, counted: counted}, nil
}

// getBody is installed as each attempt's [http.Request.GetBody] when a
// replay is safe, so the base transport's own rewinds (HTTP/2 GOAWAY and
// REFUSED_STREAM, 307 and 308 redirects) replay too.
//
// It refuses a body whose reading failed or contradicted its ContentLength:
// net/http's HTTP/2 client replays after a PROTOCOL_ERROR reset, which is
// how a server answers a body shorter than declared.
func (b *replayBody) getBody() (io.ReadCloser, error) {
	b.mu.Lock()
	err := cmp.Or(b.lengthErr, b.err)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return b.reader(false)
}

// replayable reports whether another attempt could send the whole body.
func (b *replayBody) replayable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.replayableLocked()
}

func (b *replayBody) replayableLocked() bool {
	switch {
	case b.err != nil, b.lengthErr != nil:
		return false // the caller's body failed or lied; it would again
	case b.reading:
		// The read in flight may take the copy past max.
		return !b.dropped && b.pos+int64(b.readingLen) <= b.max
	}
	return !b.dropped || b.pos == 0
}

// awaitComplete returns once the whole body has been read and kept, to
// its end or to its declared length (net/http reads no further), so that
// a new reader replays it without reading the caller's body. It returns
// errHedgeUnready at once when that can no longer happen (the copy was
// dropped, or the caller's body failed or lied), and ctx's error when ctx
// ends first.
func (b *replayBody) awaitComplete(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.wake.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		switch {
		case b.dropped || b.err != nil || b.lengthErr != nil:
			return errHedgeUnready
		case b.eof || b.declared > 0 && b.pos == b.declared:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		b.wake.Wait() // for a read of the source to end
	}
}

// retire cuts off every reader handed out so far, once a retry is decided,
// and reports whether the next attempt can send the whole body. When it
// cannot, nothing is cut off: the last attempt's writer may go on.
func (b *replayBody) retire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.replayableLocked() {
		return false
	}
	b.gen++
	b.open = 0
	b.wake.Broadcast()
	return true
}

// mismatch returns the error that says the caller's body contradicted its
// ContentLength, or nil.
func (b *replayBody) mismatch() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lengthErr
}

// finish records that no further reader will be made, and closes the
// caller's body once every reader that counts has been closed.
func (b *replayBody) finish() {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
	b.closeIfUnused()
}

// closeIfUnused closes the caller's body when RoundTrip has returned and
// no reader holds it open, and drops the copy: the response keeps the last
// attempt's request, whose GetBody keeps b, so without this a caller
// holding the response would hold the whole copy too.
func (b *replayBody) closeIfUnused() {
	b.mu.Lock()
	last := b.done && b.open == 0
	if last {
		b.release()
	}
	b.mu.Unlock()
	if last {
		// A reader cut off may still be in src.Read: closing src under it
		// is what net/http itself does to a body it abandons.
		b.closeSource()
	}
}

// replayReader is one attempt's view of a replayBody. Its fields are
// guarded by b.mu.
type replayReader struct {
	b       *replayBody
	off     int64
	gen     int  // the attempt generation it belongs to
	counted bool // it holds the caller's body open
	closed  bool
}

func (r *replayReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return r.b.read(r, p)
}

// Close releases r and wakes it if it waits for a read in flight. The
// caller's body is closed when the last reader that counts is, after
// RoundTrip returned, so a base transport still writing the last attempt
// never has the body closed under it.
func (r *replayReader) Close() error {
	b := r.b
	b.mu.Lock()
	if r.closed {
		b.mu.Unlock()
		return nil
	}
	r.closed = true
	if r.counted && r.gen == b.gen {
		b.open--
	}
	b.wake.Broadcast()
	b.mu.Unlock()
	b.closeIfUnused()
	return nil
}
