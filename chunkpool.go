package retry

import (
	"math/bits"
	"sync"
)

// The replay copy is kept in chunks from pools, one per size class, so
// that a steady stream of requests allocates no body bytes: a chunk goes
// back to its pool when the RoundTrip that filled it has returned and no
// reader of any of its attempts can read it again (see
// replayBody.release).
//
// The classes are the powers of two from minChunk to maxChunk: a chunk of
// class k holds minChunk<<k bytes.
const chunkClasses = 8 // minChunk<<7 == maxChunk

var chunkPools [chunkClasses]sync.Pool

// chunk is one piece of a replay copy; buf's capacity is its class's size.
type chunk struct {
	buf   []byte
	class uint8
}

// chunkClass returns the smallest class that holds size bytes, size at
// most maxChunk.
func chunkClass(size int) int {
	if size <= minChunk {
		return 0
	}
	return bits.Len(uint(size-1)) - bits.Len(uint(minChunk-1))
}

// getChunk returns an empty chunk that holds at least size bytes, at most
// maxChunk.
func getChunk(size int) *chunk {
	k := chunkClass(min(size, maxChunk))
	if c, ok := chunkPools[k].Get().(*chunk); ok {
		return c
	}
	return &chunk{buf: make([]byte, 0, minChunk<<k), class: uint8(k)}
}

// poisonReleased makes putChunk overwrite what it returns, for the tests:
// a reader that read a chunk after its release would then yield bytes
// that are not the body's.
var poisonReleased bool

// putChunk returns c to its pool. Nothing may use c afterwards.
func putChunk(c *chunk) {
	if poisonReleased {
		full := c.buf[:cap(c.buf)]
		full[0] = 0xA5
		for n := 1; n < len(full); n *= 2 {
			copy(full[n:], full[:n])
		}
	}
	c.buf = c.buf[:0]
	chunkPools[c.class].Put(c)
}
