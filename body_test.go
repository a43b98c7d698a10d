package retry

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within runs f and fails the test if it has not returned after a
// generous bound: the calls it guards must not wait for a blocked reader
// at all, so the bound is never reached unless they do.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// A caller's body that blocks (a paused io.Pipe) holds no lock while it is
// read: closing the reader, making another, deciding a retry and ending
// RoundTrip all return at once, and a reader waiting for the blocked read
// wakes when it is closed. Ending RoundTrip with no reader of the last
// attempt open closes the caller's body, which ends the blocked read.
func TestReplayBodyNoLockAcrossRead(t *testing.T) {
	pr, pw := io.Pipe()
	src := &countingPipe{PipeReader: pr}
	b := newReplayBody(src, -1, 1<<20)

	first, err := b.reader(true)
	require.NoError(t, err)
	go pw.Write([]byte("abc"))
	p := make([]byte, 3)
	n, err := io.ReadFull(first, p)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	blocked := make(chan error, 1)
	go func() {
		_, err := first.Read(make([]byte, 10)) // the pipe has nothing more: blocks
		blocked <- err
	}()
	waitReading(b)

	var second *replayReader
	within(t, "replayable", func() { assert.True(t, b.replayable()) })
	within(t, "retire", func() { assert.True(t, b.retire()) })
	within(t, "reader", func() { second, err = b.reader(true) })
	require.NoError(t, err)
	got := make([]byte, 3)
	_, err = io.ReadFull(second, got)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(got), "the copy is served while the source read is in flight")

	waiting := make(chan error, 1)
	go func() {
		_, err := second.Read(make([]byte, 10)) // waits for the read in flight
		waiting <- err
	}()
	within(t, "Close of the first reader", func() { first.Close() })
	within(t, "Close of a waiting reader", func() { second.Close() })
	within(t, "the waiting reader", func() { assert.ErrorIs(t, <-waiting, errBodyClosed) })
	assert.Zero(t, src.closes.Load(), "the caller's body is closed only when RoundTrip ends")
	within(t, "finish", b.finish)
	assert.EqualValues(t, 1, src.closes.Load())
	within(t, "the blocked read", func() { assert.ErrorIs(t, <-blocked, io.ErrClosedPipe) })
}

// countingPipe is a caller's body that blocks until written to, and counts
// its Close calls.
type countingPipe struct {
	*io.PipeReader
	closes atomic.Int32
}

func (p *countingPipe) Close() error {
	p.closes.Add(1)
	return p.PipeReader.Close()
}

// waitReading returns once a reader of b is in a read of the caller's
// body, without sleeping.
func waitReading(b *replayBody) {
	for {
		b.mu.Lock()
		reading := b.reading
		b.mu.Unlock()
		if reading {
			return
		}
		runtime.Gosched()
	}
}

// Once a retry is decided, the readers of earlier attempts read no more of
// the caller's body, and do not hold it open; the new attempt's reader
// yields every byte.
func TestReplayBodyRetireCutsOffEarlierReaders(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 100)
	src := &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
	b := newReplayBody(src, -1, 1<<20)
	first, err := b.reader(true)
	require.NoError(t, err)
	n, err := first.Read(make([]byte, 100))
	require.NoError(t, err)
	require.Equal(t, 100, n)

	require.True(t, b.retire())
	_, err = first.Read(make([]byte, 100))
	assert.ErrorIs(t, err, errBodySuperseded)

	second, err := b.reader(true)
	require.NoError(t, err)
	b.finish()
	assert.Zero(t, src.closes.Load(), "the current attempt's reader holds the body open")
	got, err := io.ReadAll(second)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	second.Close()
	assert.EqualValues(t, 1, src.closes.Load(), "the superseded reader, never closed, does not hold the body open")
	first.Close()
	assert.EqualValues(t, 1, src.closes.Load())
}

// A retry is refused while a read in flight could take the body past
// MaxBufferedBody: the writer net/http lets run on would otherwise drop
// the copy the retry needs.
func TestReplayBodyRetireRefusedWhenReadMayOverflow(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	b := newReplayBody(pr, -1, 100)
	r, err := b.reader(true)
	require.NoError(t, err)
	go pw.Write(make([]byte, 60))
	_, err = io.ReadFull(r, make([]byte, 60))
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Read(make([]byte, 50)) // 60 + 50 > 100
	}()
	waitReading(b)
	assert.False(t, b.retire())
	pw.Write(make([]byte, 10)) // ends the read: 70 bytes, within the limit
	<-done
	assert.True(t, b.retire())
}

// A reader GetBody made and nobody read does not hold the caller's body
// open: net/http makes one for a replay and drops it, unclosed, when it
// finds no connection for it.
func TestReplayBodyUnreadGetBodyReader(t *testing.T) {
	src := &countingCloser{Reader: &opaqueReader{bytes.NewReader([]byte("body"))}}
	b := newReplayBody(src, 4, 1<<20)
	attempt, err := b.reader(true)
	require.NoError(t, err)
	io.ReadAll(attempt)
	dropped, err := b.getBody()
	require.NoError(t, err)
	attempt.Close()
	b.finish()
	assert.EqualValues(t, 1, src.closes.Load())
	_, err = dropped.Read(make([]byte, 4))
	assert.ErrorIs(t, err, errBodyFinished, "a reader first read after the body was closed fails")

	// One that is read holds it open until it is closed.
	src = &countingCloser{Reader: &opaqueReader{bytes.NewReader([]byte("body"))}}
	b = newReplayBody(src, 4, 1<<20)
	attempt, _ = b.reader(true)
	replay, _ := b.getBody()
	got, err := io.ReadAll(replay)
	require.NoError(t, err)
	assert.Equal(t, "body", string(got))
	attempt.Close()
	b.finish()
	assert.Zero(t, src.closes.Load())
	replay.Close()
	assert.EqualValues(t, 1, src.closes.Load())
}

// The copy grows with the bytes that arrive, not with the ContentLength
// the request declares.
func TestReplayBodyGrowsAsBytesArrive(t *testing.T) {
	b := newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader([]byte("x"))}), 8<<20, 8<<20)
	r, _ := b.reader(true)
	io.ReadAll(r)
	held := 0
	for _, c := range b.chunks {
		held += cap(c)
	}
	assert.LessOrEqual(t, held, minChunk, "a 1-byte body announced as 8 MiB holds %d bytes", held)

	// A body that matches its length is copied with little slack.
	payload := bytes.Repeat([]byte("y"), 3<<20+17)
	b = newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader(payload)}), int64(len(payload)), 8<<20)
	r, _ = b.reader(true)
	io.ReadAll(r)
	held = 0
	for _, c := range b.chunks {
		held += cap(c)
	}
	assert.Less(t, held, len(payload)+maxChunk)
	assert.NoError(t, b.mismatch())
}

// A body that contradicts its declared ContentLength is found out as it is
// read, and makes the body unfit for a retry.
func TestReplayBodyLengthMismatch(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		declared int64
		want     string
	}{
		{"longer", "0123456789", 5, "longer than its ContentLength 5"},
		{"shorter", "01234", 10, "ended after 5 bytes, short of its ContentLength 10"},
		{"exact", "01234", 5, ""},
		{"unknown", "01234", -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader([]byte(tt.body))}), tt.declared, 1<<20)
			r, _ := b.reader(true)
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			assert.Equal(t, tt.body, string(got), "the bytes pass through: net/http decides what to send")
			err = b.mismatch()
			if tt.want == "" {
				assert.NoError(t, err)
				assert.True(t, b.retire())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.False(t, b.retire())
		})
	}
}

// A closed reader reads no more.
func TestReplayBodyReadAfterClose(t *testing.T) {
	b := newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader([]byte("body"))}), -1, 1<<20)
	r, _ := b.reader(true)
	r.Close()
	_, err := r.Read(make([]byte, 4))
	assert.True(t, errors.Is(err, errBodyClosed), "Read after Close = %v", err)
}
