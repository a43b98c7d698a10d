package retry

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Readers of one body agree while the first attempt streams it in small
// pieces: copies of other attempts (GetBody's readers, a hedge's) started
// at any moment, with buffers of any size, each of which may take its
// turn reading the caller's body, yield exactly the caller's bytes, and
// the caller's body is closed once.
func TestReplayBodyConcurrentReaders(t *testing.T) {
	payload := make([]byte, 100<<10)
	for i := range payload {
		payload[i] = byte(i*31 + 7)
	}
	for round := range 30 {
		src := &countingCloser{Reader: iotest.HalfReader(&opaqueReader{bytes.NewReader(payload)})}
		b := newReplayBody(src, -1, 1<<20)
		first, err := b.reader(true)
		require.NoError(t, err)
		var wg sync.WaitGroup
		got := make([][]byte, 4)
		readAll := func(i int, r io.ReadCloser, size int) {
			defer r.Close()
			buf := make([]byte, size)
			for {
				n, err := r.Read(buf)
				got[i] = append(got[i], buf[:n]...)
				if err != nil {
					if err != io.EOF {
						t.Errorf("round %d, reader %d: %v", round, i, err)
					}
					return
				}
			}
		}
		wg.Go(func() { readAll(0, first, 512) })
		for i := 1; i < len(got); i++ {
			wg.Go(func() {
				r, err := b.reader(false)
				if err != nil {
					t.Error(err)
					return
				}
				readAll(i, r, []int{3, 700, 64 << 10}[(i+round)%3])
			})
		}
		wg.Wait()
		b.finish()
		for i, g := range got {
			if !bytes.Equal(g, payload) {
				t.Fatalf("round %d: reader %d yielded %d bytes, not the caller's %d", round, i, len(g), len(payload))
			}
		}
		assert.Equal(t, int32(1), src.closes.Load())
	}
}

// The end of RoundTrip may release the copy while the first attempt's
// reader, closed under it, is still in a read of the caller's body: what
// that read brings is never written into chunks gone back to the pools,
// so another body's copy taken from them meanwhile is never overwritten
// (the race detector and the other bodies' bytes tell).
func TestReplayBodyReleaseWhileStreaming(t *testing.T) {
	payload := bytes.Repeat([]byte("streamed while released "), 4<<10)
	var others sync.WaitGroup
	stop := make(chan struct{})
	others.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b := newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader(payload)}), -1, 1<<20)
			r, _ := b.reader(true)
			io.Copy(io.Discard, r)
			replay, _ := b.reader(false)
			got, err := io.ReadAll(replay)
			if err != nil || !bytes.Equal(got, payload) {
				t.Errorf("another body's copy yielded %d bytes, %v: overwritten", len(got), err)
			}
			r.Close()
			replay.Close()
			b.finish()
		}
	})
	for range 200 {
		b := newReplayBody(io.NopCloser(iotest.OneByteReader(&opaqueReader{bytes.NewReader(payload)})), -1, 1<<20)
		r, _ := b.reader(true)
		done, streaming := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 64)
			var got []byte
			for i := 0; ; i++ {
				if i == 10 {
					close(streaming) // well into the stream
				}
				n, err := r.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					if !errors.Is(err, errBodyClosed) && err != io.EOF {
						t.Errorf("read: %v", err)
					}
					break
				}
			}
			if !bytes.HasPrefix(payload, got) {
				t.Errorf("the streaming reader yielded bytes that are not the caller's")
			}
		}()
		<-streaming
		r.Close()
		b.finish() // releases the copy, perhaps while the read writes into it
		<-done
	}
	close(stop)
	others.Wait()
}
