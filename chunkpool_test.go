package retry

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests poison every chunk returned to a pool, so that a reader that
// read one after its release (the fuzzers' above all) yields wrong bytes.
func init() { poisonReleased = true }

func TestChunkClass(t *testing.T) {
	for _, tc := range []struct{ size, class int }{
		{0, 0}, {1, 0}, {minChunk, 0}, {minChunk + 1, 1}, {1024, 1}, {1025, 2},
		{maxChunk / 2, chunkClasses - 2}, {maxChunk/2 + 1, chunkClasses - 1}, {maxChunk, chunkClasses - 1},
	} {
		assert.Equal(t, tc.class, chunkClass(tc.size), "chunkClass(%d)", tc.size)
		assert.GreaterOrEqual(t, minChunk<<tc.class, tc.size, "class %d holds %d", tc.class, tc.size)
	}
	assert.Equal(t, maxChunk, minChunk<<(chunkClasses-1))
	c := getChunk(3000)
	assert.Equal(t, 4096, cap(c.buf))
	assert.Zero(t, len(c.buf))
	putChunk(c)
}

// A body replayed and finished gives its copy back: the next body of the
// same size allocates no body bytes.
func TestReplayCopyIsPooled(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	buf := make([]byte, 32<<10)
	readAll := func(r io.Reader) {
		off := 0
		for {
			n, err := r.Read(buf)
			if !bytes.Equal(buf[:n], payload[off:off+n]) {
				t.Fatalf("bytes %d to %d differ from the body's", off, off+n)
			}
			off += n
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		require.Equal(t, len(payload), off)
	}
	src := &opaqueReader{}
	send := func() {
		src.r = bytes.NewReader(payload)
		b := newReplayBody(io.NopCloser(src), -1, 8<<20)
		first, err := b.reader(true)
		require.NoError(t, err)
		readAll(first)
		first.Close()
		require.True(t, b.retire())
		second, err := b.reader(true)
		require.NoError(t, err)
		readAll(second)
		second.Close()
		b.finish()
		require.Nil(t, b.chunks, "the copy is dropped")
	}
	send()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		send()
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("%d bytes allocated per 1 MiB body copied and replayed", perRun)
	if raceEnabled {
		return // sync.Pool drops a share of what it is given under -race
	}
	// Without the pools, the copy itself: 1 MiB and more.
	assert.Less(t, perRun, uint64(64<<10))
}

// BenchmarkReplayBodyStream is the first attempt's streaming path: a 1 MiB
// body read in pieces of a given size through a replay reader (copied
// aside as it goes), against the same reads of the body itself.
func BenchmarkReplayBodyStream(b *testing.B) {
	poisonReleased = false // measure the library, not the tests' poison
	b.Cleanup(func() { poisonReleased = true })
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, size := range []int{512, 4 << 10, 32 << 10} {
		buf := make([]byte, size)
		drain := func(r io.Reader) {
			for {
				if _, err := r.Read(buf); err != nil {
					return
				}
			}
		}
		b.Run(fmt.Sprintf("read=%d/direct", size), func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				drain(bytes.NewReader(payload))
			}
		})
		b.Run(fmt.Sprintf("read=%d/replay", size), func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			src := &opaqueReader{}
			for b.Loop() {
				src.r = bytes.NewReader(payload)
				rb := newReplayBody(io.NopCloser(src), -1, 8<<20)
				r, _ := rb.reader(true)
				drain(r)
				r.Close()
				rb.finish()
			}
		})
	}
}
