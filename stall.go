package retry

import (
	"context"
	"io"
	"sync"
	"time"
)

// stallBody is the body of a returned response under a StallTimeout: a
// Read that waits that long for bytes ends the attempt's context, which
// closes the response's connection (HTTP/1.1) or resets its stream
// (HTTP/2), and fails with ErrBodyStalled.
//
// One timer at a time watches the reads: armed by a Read when none is
// pending, it checks when it fires whether a Read has waited the whole
// timeout, and if a Read is under way but began later, waits again for
// the rest. So a caller that reads in a loop arms about one timer per
// timeout, not one per Read, and a caller that stops reading arms none.
type stallBody struct {
	io.ReadCloser
	s      *settings
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	reading bool      // a Read is under way
	since   time.Time // when it began
	armed   bool      // a timer is pending
	timer   timer
	stalled bool
	closed  bool
}

func newStallBody(body io.ReadCloser, s *settings, cancel context.CancelCauseFunc) *stallBody {
	return &stallBody{ReadCloser: body, s: s, cancel: cancel}
}

func (b *stallBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.stalled {
		b.mu.Unlock()
		return 0, ErrBodyStalled
	}
	b.reading, b.since = true, b.s.now()
	if !b.armed && !b.closed {
		b.armed = true
		b.timer = b.s.afterFunc(b.s.stallTimeout, b.check)
	}
	b.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.reading = false
	stalled := b.stalled
	b.mu.Unlock()
	if stalled && err != nil {
		return n, ErrBodyStalled
	}
	return n, err
}

// check runs when the timer fires: a Read that has waited the whole
// timeout stalls the body; one that began later is checked again when
// its own timeout would end; with none under way, the next Read arms a
// timer anew.
func (b *stallBody) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	if !b.reading || b.closed {
		return
	}
	waited := b.s.now().Sub(b.since)
	if waited < b.s.stallTimeout {
		b.armed = true
		b.timer = b.s.afterFunc(b.s.stallTimeout-waited, b.check)
		return
	}
	b.stalled = true
	b.cancel(ErrBodyStalled)
}

func (b *stallBody) Close() error {
	b.mu.Lock()
	b.closed = true
	if b.armed {
		b.timer.stop()
		b.armed = false
	}
	b.mu.Unlock()
	return b.ReadCloser.Close()
}
