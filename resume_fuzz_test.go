package retry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// brokenReader yields data, then fails with err.
type brokenReader struct {
	data []byte
	err  error
}

func (r *brokenReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func (r *brokenReader) Close() error { return nil }

// FuzzResumeSplice varies the answers to the resumes of a broken body (a
// 200 or a 206, a validator that differs or is missing, a Content-Range
// that starts before or after the break, a length that differs, a part
// shorter than it says, an encoding) and checks that no answer yields a
// corrupt splice: the bytes read are always the resource's, and a read
// that ends without an error has all of them.
func FuzzResumeSplice(f *testing.F) {
	f.Add(uint16(1000), uint16(300), []byte{1, 0, 0, 0, 0, 0})
	f.Add(uint16(1000), uint16(300), []byte{1, 0, 2, 0, 0, 0})
	f.Add(uint16(1000), uint16(300), []byte{0, 0, 0, 0, 0, 0})
	f.Add(uint16(50), uint16(49), []byte{1, 0, 0, 1, 3, 0, 1, 0, 0, 0, 0, 0})
	f.Add(uint16(4000), uint16(0), []byte{1, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, size, cut uint16, script []byte) {
		if size == 0 {
			return
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i/251)
		}
		cut %= size
		next := func() byte {
			if len(script) == 0 {
				return 0
			}
			b := script[0]
			script = script[1:]
			return b
		}
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			h := http.Header{}
			rng := req.Header.Get("Range")
			if rng == "" {
				h.Set("ETag", `"v1"`)
				return &http.Response{StatusCode: 200, Status: "200 OK", Header: h, Request: req, ContentLength: int64(size),
					Body: &brokenReader{data: data[:cut], err: io.ErrUnexpectedEOF}}, nil
			}
			from, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rng, "bytes="), "-"), 10, 64)
			if err != nil || from < 0 || from > int64(size) {
				t.Fatalf("a resume asked for %q", rng)
			}
			status := []int{206, 206, 200, 416, 503}[int(next())%5]
			switch next() % 3 {
			case 0:
				h.Set("ETag", `"v1"`)
			case 1:
				h.Set("ETag", `"v2"`)
			}
			start := max(from+int64(int8(next()%5))-2, 0)
			total := int64(size) + int64(int8(next()%3)) - 1
			end := total - 1
			if status == 200 {
				start, end = 0, int64(size)-1
			}
			start, end = min(start, int64(size)), min(end, int64(size)-1)
			if end < start {
				end = start
			}
			body := data[min(start, int64(size)):min(end+1, int64(size))]
			if short := int(next() % 4); short > 0 && len(body) > 0 {
				body = body[:len(body)*(4-short)/4] // fewer bytes than it says
			}
			if next()%4 == 0 {
				h.Set("Content-Encoding", "gzip")
			}
			if status == 206 {
				h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, total))
			}
			return &http.Response{StatusCode: status, Status: strconv.Itoa(status), Header: h, Request: req,
				ContentLength: end - start + 1, Body: &brokenReader{data: body, err: io.EOF}}, nil
		})
		rt := New(base, WithBackoff(Constant{}), WithBudget(NoBudget), WithPacer(NoPacer))
		resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1:1/file", nil))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, data[:min(len(got), len(data))]) || len(got) > len(data) {
			t.Fatalf("a corrupt splice: %d bytes read of %d, err %v", len(got), len(data), err)
		}
		if err == nil && len(got) != len(data) {
			t.Fatalf("%d bytes of %d read and no error", len(got), len(data))
		}
		var rerr *ResumeError
		if err != nil && !errors.As(err, &rerr) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("the read failed with %v; want a ResumeError or the break", err)
		}
	})
}
