package retry

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/iotest"
	"time"
)

// The fuzz targets here fill the gaps the parsers' own leave: ServerWait
// over every header it reads, with several field lines each; the three
// HTTP-date forms of Retry-After read back to the wait they were written
// for; and the replay body that every attempt reads, under any
// interleaving of its readers.

// serverWaitNames are the fields ServerWait reads, in canonical form.
var serverWaitNames = []string{
	"Retry-After", "X-Amz-Retry-After", "Retry-After-Ms", "X-Ms-Retry-After-Ms", "Ratelimit",
	"Ratelimit-Remaining", "Ratelimit-Reset", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
}

// FuzzServerWaitHeaders builds a header from fuzzed (field, value) lines
// over every field ServerWait reads and checks that the wait is never
// negative, is 0 when none was found, that a valid Retry-After in the first
// line wins, and otherwise that the wait is at least each well-formed
// millisecond field's: the longest wait honours them all.
func FuzzServerWaitHeaders(f *testing.F) {
	f.Add([]byte("\x00120\n\x021500\n\x035"), uint8(0), int64(1735787105))
	f.Add([]byte("\x00soon\n\x022000\n\x04\"p\";r=0;t=30\n\x0699999999999999999999"), uint8(1), int64(1735787105))
	f.Add([]byte("\x02-1\n\x03 250 \n\x0799\n\x080.5\n\x051"), uint8(2), int64(0))
	f.Add([]byte("\x04\"a\";r=0;t=5\n\x04x;\n\x01\t7\t"), uint8(3), int64(1<<33))
	f.Fuzz(func(t *testing.T, lines []byte, format uint8, nowUnix int64) {
		now := time.Unix(nowUnix%(1<<40), 0)
		h := make(http.Header)
		for _, line := range bytes.Split(lines, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			name := serverWaitNames[int(line[0])%len(serverWaitNames)]
			h[name] = append(h[name], string(line[1:]))
		}
		xReset := ResetFormat(format % 5) // 4 is not a format: ignored
		got, ok := ServerWait(h, now, xReset)
		if again, ok2 := ServerWait(h, now, xReset); again != got || ok2 != ok {
			t.Fatalf("ServerWait(%q) = %v, %v, then %v, %v", h, got, ok, again, ok2)
		}
		if got < 0 || !ok && got != 0 {
			t.Fatalf("ServerWait(%q) = %v, %v; want a non-negative wait, 0 when not ok", h, got, ok)
		}
		if d, raOK := ParseRetryAfter(h.Get("Retry-After"), now); raOK {
			if got != d || !ok {
				t.Fatalf("ServerWait(%q) = %v, %v; want Retry-After's %v, true", h, got, ok, d)
			}
			return
		}
		for _, name := range []string{"X-Amz-Retry-After", "Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
			if n, valid := parseDigits(trimFieldOWS(h.Get(name))); valid && (!ok || got < millisWait(n)) {
				t.Fatalf("ServerWait(%q) = %v, %v; want at least %s's %v", h, got, ok, name, millisWait(n))
			}
		}
	})
}

// FuzzRetryAfterDates writes now+ahead (whole seconds, up to 49 years
// ahead or behind) in each of the three HTTP-date forms and checks that
// ParseRetryAfter reads each back as the same wait: ahead, or 0 for a date
// in the past. RFC 850's two-digit year is read within 50 years of now.
func FuzzRetryAfterDates(f *testing.F) {
	f.Add(int64(1735787105), int64(90))
	f.Add(int64(1735787105), int64(-3600))
	f.Add(int64(946684799), int64(1))               // a second before 2000
	f.Add(int64(4102444799), int64(86400))          // the end of 2099
	f.Add(int64(1735787105), int64(49*365*86400))   // 49 years ahead
	f.Add(int64(1735787105), int64(-49*365*86400))  // 49 years behind
	f.Add(int64(253402300799-86400), int64(3*3600)) // near the end of year 9999
	f.Fuzz(func(t *testing.T, nowUnix, ahead int64) {
		const maxAhead = 49 * 365 * 86400 // RFC 850 dates are unambiguous within 50 years
		nowUnix = nowUnix % 253402300799  // up to the end of year 9999
		if nowUnix < 0 {
			nowUnix = -nowUnix
		}
		ahead = ahead % maxAhead
		now := time.Unix(nowUnix, 0).UTC()
		when := now.Add(time.Duration(ahead) * time.Second)
		if when.Year() > 9999 || when.Year() < 1000 {
			return // not a four-digit year: no HTTP-date can say it
		}
		want := max(when.Sub(now), 0)
		for _, layout := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
			v := when.Format(layout)
			if layout == time.RFC850 {
				v = when.Format("Monday, 02-Jan-06 15:04:05 GMT")
			}
			got, ok := ParseRetryAfter(v, now)
			if !ok || got != want {
				t.Errorf("ParseRetryAfter(%q, %v) = %v, %v; want %v, true", v, now, got, ok, want)
			}
		}
	})
}

// FuzzReplayBody plays a fuzzed sequence of operations on a replay body (a
// new reader, as an attempt makes, or as net/http's GetBody makes; a read of
// n bytes by one reader; a close; a retry decided; the end of RoundTrip)
// over a caller's body that yields its bytes in odd pieces and may fail at
// the end, and checks that:
//
//   - every reader yields a prefix of the caller's bytes, then io.EOF only
//     at the end, the caller's error only where the caller failed,
//     errBodyNotReplayable only once the copy was dropped for
//     MaxBufferedBody, errBodySuperseded only for a reader of an attempt
//     before the last retry, errBodyFinished only for a GetBody reader
//     first read after the caller's body was closed;
//   - a retry is allowed only while the whole body can still be sent;
//   - the caller's body is closed exactly once, and only when RoundTrip
//     ended and every reader of the last attempt that counts was closed:
//     an attempt's own reader from the start, a GetBody reader once read.
func FuzzReplayBody(f *testing.F) {
	f.Add([]byte{0, 1, 0, 50, 0, 1, 0, 9, 2, 0, 1, 1, 255, 3}, uint16(300), uint16(1000), int64(-1), uint8(0), false)
	f.Add([]byte{0, 1, 0, 255, 0, 1, 1, 255, 3, 2, 0, 2, 1}, uint16(300), uint16(100), int64(300), uint8(1), false)
	f.Add([]byte{0, 0, 1, 0, 7, 1, 1, 255, 1, 0, 255, 2, 0, 2, 1, 3}, uint16(5000), uint16(0), int64(5000), uint8(2), true)
	f.Add([]byte{0, 3, 1, 0, 1}, uint16(10), uint16(5), int64(10), uint8(0), false)
	f.Add([]byte{0, 1, 0, 20, 4, 5, 1, 1, 255, 2, 0, 5, 3, 1, 2, 255, 2, 1}, uint16(200), uint16(1000), int64(150), uint8(1), false)
	f.Fuzz(func(t *testing.T, ops []byte, size, maxBuf uint16, contentLength int64, mode uint8, fail bool) {
		payload := make([]byte, int(size)%70000)
		for i := range payload {
			payload[i] = byte(i*13 + 1)
		}
		var r io.Reader = bytes.NewReader(payload)
		switch mode % 3 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.HalfReader(r)
		}
		errCaller := errors.New("the caller's body failed")
		if fail {
			r = &errAfterReader{r, errCaller}
		}
		src := &countingCloser{Reader: r}
		limit := int64(maxBuf)
		b := newReplayBody(src, contentLength, limit)

		type reader struct {
			rc      *replayReader
			gen     int
			counted bool
			got     []byte
			closed  bool
			done    bool // returned an error
		}
		var readers []*reader
		gen := 0
		finished := false
		sourceRead := 0 // bytes any reader has taken from the caller's body
		failed := false // a reader saw the caller's error
		ended := false  // a reader saw the end of the caller's body
		pick := func(i byte) *reader {
			if len(readers) == 0 {
				return nil
			}
			return readers[int(i)%len(readers)]
		}
		open := func() int {
			n := 0
			for _, rd := range readers {
				if rd.gen == gen && rd.counted && !rd.closed {
					n++
				}
			}
			return n
		}
		checkClosed := func() {
			want := int32(0)
			if finished && open() == 0 {
				want = 1
			}
			if n := src.closes.Load(); n != want {
				t.Fatalf("caller's body closed %d times (finished %v, %d readers open); want %d", n, finished, open(), want)
			}
		}
		for i := 0; i < len(ops) && i < 200; i++ {
			switch ops[i] % 6 {
			case 0, 5: // a new reader: the attempt's own, or GetBody's
				counted := ops[i]%6 == 0
				rc, err := b.reader(counted)
				if finished {
					if err == nil {
						t.Fatal("reader() after finish succeeded")
					}
					continue
				}
				if err != nil {
					t.Fatalf("reader() = %v", err)
				}
				readers = append(readers, &reader{rc: rc, gen: gen, counted: counted})
			case 1: // a read
				if i+2 >= len(ops) {
					break
				}
				rd := pick(ops[i+1])
				n := int(ops[i+2])
				i += 2
				if rd == nil || rd.closed || rd.done {
					continue
				}
				if n == 255 {
					n = 1 << 20
				}
				wasOpen := open()
				p := make([]byte, n)
				k, err := rd.rc.Read(p)
				rd.got = append(rd.got, p[:k]...)
				sourceRead = max(sourceRead, len(rd.got))
				if !bytes.HasPrefix(payload, rd.got) {
					t.Fatalf("a reader yielded %d bytes that are not a prefix of the body", len(rd.got))
				}
				if n > 0 && !errors.Is(err, errBodyFinished) && !errors.Is(err, errBodySuperseded) {
					rd.counted = true // a read, not an empty one, counts a reader
				}
				switch {
				case err == nil:
				case err == io.EOF:
					rd.done, ended = true, true
					if fail || len(rd.got) != len(payload) {
						t.Fatalf("io.EOF after %d of %d bytes (caller fails: %v)", len(rd.got), len(payload), fail)
					}
				case errors.Is(err, errCaller):
					rd.done, failed, ended = true, true, true
					if !fail || len(rd.got) != len(payload) {
						t.Fatalf("the caller's error after %d of %d bytes", len(rd.got), len(payload))
					}
				case errors.Is(err, errBodyNotReplayable):
					rd.done = true
					if contentLength <= limit && int64(len(payload)) <= limit {
						t.Fatalf("errBodyNotReplayable for a %d-byte body (announced %d) within MaxBufferedBody %d", len(payload), contentLength, limit)
					}
				case errors.Is(err, errBodySuperseded):
					rd.done = true
					if rd.gen == gen {
						t.Fatal("errBodySuperseded for a reader of the current attempt")
					}
				case errors.Is(err, errBodyFinished):
					rd.done = true
					if rd.counted || !finished || wasOpen != 0 {
						t.Fatalf("errBodyFinished for a reader (counted %v) with RoundTrip finished %v and %d readers open", rd.counted, finished, wasOpen)
					}
				default:
					t.Fatalf("Read error %v", err)
				}
			case 2: // a close
				if i+1 >= len(ops) {
					break
				}
				rd := pick(ops[i+1])
				i++
				if rd == nil {
					continue
				}
				if err := rd.rc.Close(); err != nil {
					t.Fatalf("Close = %v", err)
				}
				rd.closed = true
			case 3: // RoundTrip returns
				if !finished {
					b.finish()
					finished = true
				}
			case 4: // a retry is decided
				if finished {
					continue
				}
				ok := b.retire()
				whole := !failed && (int64(sourceRead) <= limit && contentLength <= limit || sourceRead == 0)
				lied := contentLength > 0 && (int64(sourceRead) > contentLength || ended && int64(sourceRead) < contentLength)
				if ok && (!whole || lied) {
					t.Fatalf("retire allowed a retry after %d bytes were read (MaxBufferedBody %d, announced %d, caller failed %v)", sourceRead, limit, contentLength, failed)
				}
				if !ok && whole && !lied {
					t.Fatalf("retire refused a retry after %d bytes were read (MaxBufferedBody %d, announced %d)", sourceRead, limit, contentLength)
				}
				if ok {
					gen++
				}
			}
			checkClosed()
		}
		if !finished {
			b.finish()
			finished = true
		}
		for _, rd := range readers {
			rd.rc.Close()
			rd.closed = true
		}
		checkClosed()
	})
}
