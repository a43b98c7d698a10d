package retry

import "io"

// The reads of a replayBody. One reader at a time reads the caller's body
// (the source), the claimant: it claims the source by swapping reading
// from 0, records what it reads into the copy, publishes the new count in
// pos, and gives the claim back. Every other reader reads the copy below
// pos, under mu; the claimant writes only beyond pos, so it needs mu only
// to add a chunk, at the source's end or failure, and to wake a reader
// waiting for its read.
//
// So the first attempt's streaming read, the common case, takes no lock
// (fastRead): after a read of the source, the same reader's next read
// claims it again without mu, provided nothing that read must see has
// happened since (a Close, a retry, the source's end or failure, the end
// of RoundTrip: each bumps epoch under mu) and no other reader has read
// the source meanwhile (its offset is still pos).
//
// The copy is released under mu (release); while the claimant writes into
// it without mu (pinned), release leaves that to the claimant, which does
// it as it unpins.

// read serves r from the copy while it is behind the source, and from the
// source, recording what it reads, once it has caught up.
func (b *replayBody) read(r *replayReader, p []byte) (int, error) {
	if n, err, ok := b.fastRead(r, p); ok {
		return n, err
	}
	return b.slowRead(r, p)
}

// fastRead reads the source for r without mu, when r read it last and
// nothing has happened since; ok is false, with nothing read, otherwise.
func (b *replayBody) fastRead(r *replayReader, p []byte) (n int, err error, ok bool) {
	if r.epoch != b.epoch.Load() || !b.reading.CompareAndSwap(0, int64(len(p))) {
		return 0, nil, false
	}
	// Claimed: now no other reader moves pos. A Close or a retry from now
	// on is one the read in flight may miss, as a read under mu would.
	if r.epoch != b.epoch.Load() || r.off != b.pos.Load() {
		b.unclaim()
		return 0, nil, false
	}
	n, err = b.src.Read(p)
	if err == nil && b.recordFast(p[:n]) {
		r.off += int64(n)
		b.unclaim()
		return n, nil, true
	}
	b.mu.Lock()
	b.endRead(r, p[:n], err)
	b.mu.Unlock()
	return n, err, true
}

// slowRead is read under mu: a reader's first read, a read of the copy, a
// wait for another reader's read of the source, and every end.
func (b *replayBody) slowRead(r *replayReader, p []byte) (int, error) {
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
		if r.off < b.pos.Load() {
			if b.dropped.Load() {
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
		if b.reading.CompareAndSwap(0, int64(len(p))) {
			if r.off == b.pos.Load() {
				break
			}
			// A reader without mu read the source since r looked:
			// r is behind, and reads the copy.
			b.reading.Store(0)
			b.wake.Broadcast()
			continue
		}
		// Another reader reads the source, perhaps without mu: counted
		// among the waiters before looking again, so that its end wakes
		// this wait.
		b.waiters.Add(1)
		if b.reading.Load() != 0 && r.off >= b.pos.Load() {
			b.wake.Wait() // for the read in flight, or r's Close
		}
		b.waiters.Add(-1)
	}
	b.mu.Unlock()

	n, err := b.src.Read(p)

	b.mu.Lock()
	b.endRead(r, p[:n], err)
	b.mu.Unlock()
	return n, err
}

// endRead records p, what r's claim of the source read, and err, what the
// read returned, gives the claim back and wakes the waiting readers. b.mu
// must be held.
func (b *replayBody) endRead(r *replayReader, p []byte, err error) {
	if len(p) > 0 {
		b.record(p)
		r.off += int64(len(p))
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	b.checkLength()
	if b.eof || b.err != nil || b.lengthErr != nil {
		b.epoch.Add(1) // every reader's next read must see it, under mu
		r.epoch = 0
	} else {
		r.epoch = b.epoch.Load() // its next read may go without mu
	}
	b.reading.Store(0)
	b.wake.Broadcast()
}

// unclaim gives the claim of the source back without mu, waking the
// readers that wait for it, if any.
func (b *replayBody) unclaim() {
	b.reading.Store(0)
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		b.wake.Broadcast()
		b.mu.Unlock()
	}
}

// recordFast records p, just read by the claimant, without mu, and
// reports whether it could: p fits in the last chunk, within max and the
// declared length. (Otherwise endRead records it under mu.)
func (b *replayBody) recordFast(p []byte) bool {
	pos := b.pos.Load()
	end := pos + int64(len(p))
	if end > b.max || b.declared > 0 && end > b.declared {
		return false
	}
	b.pinned.Store(true)
	if !b.dropped.Load() {
		if len(b.chunks) == 0 {
			b.unpin()
			return false
		}
		last := b.chunks[len(b.chunks)-1]
		at := pos - b.lastStart
		if int64(len(last.buf))-at < int64(len(p)) {
			b.unpin()
			return false
		}
		copy(last.buf[at:], p)
	}
	b.pos.Store(end)
	b.unpin()
	return true
}

// unpin ends the claimant's writing without mu, and releases the copy if
// release was asked meanwhile.
func (b *replayBody) unpin() {
	b.pinned.Store(false)
	if b.dropped.Load() {
		b.mu.Lock()
		if b.releaseDue {
			b.releaseDue = false
			b.releaseChunks()
		}
		b.mu.Unlock()
	}
}

// checkLength records a body that contradicts its declared ContentLength,
// which net/http refuses to send (HTTP/1.1) or sends malformed (HTTP/2).
// b.mu must be held.
func (b *replayBody) checkLength() {
	if b.declared <= 0 || b.lengthErr != nil {
		return
	}
	b.lengthErr = lengthError(b.pos.Load(), b.declared, b.eof)
}

// copyAt copies recorded bytes from r's offset into p. b.mu must be held.
func (b *replayBody) copyAt(r *replayReader, p []byte) int {
	off, left := r.off, b.pos.Load()-r.off
	n := 0
	for _, c := range b.chunks {
		if off >= int64(len(c.buf)) {
			off -= int64(len(c.buf))
			continue
		}
		k := copy(p[n:min(len(p), n+int(left))], c.buf[off:])
		n += k
		left -= int64(k)
		off = 0
		if n == len(p) || left == 0 {
			break
		}
	}
	r.off += int64(n)
	return n
}

// record keeps p, read by the claimant, for replay, or drops the whole
// copy once it would exceed max, and advances pos. Chunks grow
// geometrically with the bytes already read, sized by what the declared
// length still promises, so the copy is never much larger than the body:
// at most twice, in its last chunk's class. b.mu must be held.
func (b *replayBody) record(p []byte) {
	pos := b.pos.Load()
	defer b.pos.Store(pos + int64(len(p)))
	if b.dropped.Load() {
		return
	}
	if pos+int64(len(p)) > b.max {
		b.release()
		return
	}
	for len(p) > 0 {
		var last *chunk
		if len(b.chunks) > 0 {
			last = b.chunks[len(b.chunks)-1]
		}
		at := pos - b.lastStart
		if last == nil || at == int64(len(last.buf)) {
			size := max(int64(minChunk), pos)
			size = min(size, maxChunk, b.max-pos)
			if left := b.declared - pos; left > 0 {
				size = min(size, left)
			}
			last = getChunk(int(size))
			last.buf = last.buf[:cap(last.buf)]
			b.chunks = append(b.chunks, last)
			b.lastStart, at = pos, 0
		}
		k := copy(last.buf[at:], p)
		p = p[k:]
		pos += int64(k)
	}
}

// release drops the copy, returning its chunks to their pools (or, while
// the claimant writes into it, having it do so as it unpins): no reader
// can read it again, since every read of the copy is made under b.mu and
// finds it dropped. b.mu must be held.
func (b *replayBody) release() {
	b.dropped.Store(true)
	if b.pinned.Load() {
		b.releaseDue = true
		return
	}
	b.releaseChunks()
}

// releaseChunks returns the copy's chunks to their pools. b.mu must be
// held, and the claimant must not be writing into them.
func (b *replayBody) releaseChunks() {
	for i, c := range b.chunks {
		putChunk(c)
		b.chunks[i] = nil
	}
	b.chunks = nil
}
