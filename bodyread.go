package retry

import "io"

// The reads of a replayBody: from the copy while a reader is behind the
// caller's body, from the caller's body, one reader at a time and without
// the lock, once it has caught up; and the copy's growth and release.

// read serves r from the copy while it is behind the source, and from the
// source, recording what it reads, once it has caught up.
func (b *replayBody) read(r *replayReader, p []byte) (int, error) {
	b.mu.Lock()
	for {
		switch {
		case r.closed:
			b.mu.Unlock()
			return 0, errBodyClosed
		case r.gen != b.gen:
			b.mu.Unlock()
			return 0, errBodySuperseded
		case !r.counted:
			if b.done && b.open == 0 {
				b.mu.Unlock()
				return 0, errBodyFinished // the caller's body is closed
			}
			r.counted = true
			b.open++
		}
		if r.off < b.pos {
			if b.dropped {
				b.mu.Unlock()
				return 0, errBodyNotReplayable
			}
			n := b.copyAt(r, p)
			b.mu.Unlock()
			return n, nil
		}
		if b.eof {
			b.mu.Unlock()
			return 0, io.EOF
		}
		if b.err != nil {
			err := b.err
			b.mu.Unlock()
			return 0, err
		}
		if !b.reading {
			break
		}
		b.wake.Wait() // for the read in flight, or r's Close
	}
	b.reading, b.readingLen = true, len(p)
	b.mu.Unlock()

	n, err := b.src.Read(p)

	b.mu.Lock()
	b.reading = false
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
	b.checkLength()
	b.wake.Broadcast()
	b.mu.Unlock()
	return n, err
}

// checkLength records a body that contradicts its declared ContentLength,
// which net/http refuses to send (HTTP/1.1) or sends malformed (HTTP/2).
// b.mu must be held.
func (b *replayBody) checkLength() {
	if b.declared <= 0 || b.lengthErr != nil {
		return
	}
	b.lengthErr = lengthError(b.pos, b.declared, b.eof)
}

// copyAt copies recorded bytes from r's offset into p.
func (b *replayBody) copyAt(r *replayReader, p []byte) int {
	off := r.off
	n := 0
	for _, c := range b.chunks {
		if off >= int64(len(c.buf)) {
			off -= int64(len(c.buf))
			continue
		}
		k := copy(p[n:], c.buf[off:])
		n += k
		off = 0
		if n == len(p) {
			break
		}
	}
	r.off += int64(n)
	return n
}

// record keeps p for replay, or drops the whole copy once it would exceed
// max. Chunks grow geometrically with the bytes already read, sized by
// what the declared length still promises, so the copy is never much
// larger than the body: at most twice, in its last chunk's class.
func (b *replayBody) record(p []byte) {
	if b.dropped {
		return
	}
	if b.pos+int64(len(p)) > b.max {
		b.release()
		return
	}
	for len(p) > 0 {
		var last *chunk
		if len(b.chunks) > 0 {
			last = b.chunks[len(b.chunks)-1]
		}
		if last == nil || len(last.buf) == cap(last.buf) {
			size := max(int64(minChunk), b.pos)
			size = min(size, maxChunk, b.max-b.pos)
			if left := b.declared - b.pos; left > 0 {
				size = min(size, left)
			}
			last = getChunk(int(size))
			b.chunks = append(b.chunks, last)
		}
		k := min(len(p), cap(last.buf)-len(last.buf))
		last.buf = append(last.buf, p[:k]...)
		p = p[k:]
	}
}

// release drops the copy, returning its chunks to their pools: no reader
// can read it again, since every read of the copy is made under b.mu and
// finds it dropped. b.mu must be held.
func (b *replayBody) release() {
	for i, c := range b.chunks {
		putChunk(c)
		b.chunks[i] = nil
	}
	b.chunks, b.dropped = nil, true
}
