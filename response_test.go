package retry

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peekCloseRecorder is a body that records Close calls.
type peekCloseRecorder struct {
	io.Reader
	closed int
}

func (c *peekCloseRecorder) Close() error {
	c.closed++
	return nil
}

func randomPayload(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func TestPeekBody(t *testing.T) {
	data := randomPayload(t, 1<<20)
	tests := []struct {
		name   string
		limit  int64
		reader func(io.Reader) io.Reader
		want   int
	}{
		{"small limit", 100, nil, 100},
		{"default limit", 0, nil, DefaultPeekLimit},
		{"negative limit", -1, nil, DefaultPeekLimit},
		{"limit past the end", 2 << 20, nil, len(data)},
		{"huge limit", 1<<63 - 1, nil, len(data)},
		{"one byte reads", 1000, iotest.OneByteReader, 1000},
		{"half reads", 70000, iotest.HalfReader, 70000},
		{"data with EOF", 5000, iotest.DataErrReader, 5000},
		{"data with EOF past the end", 2 << 20, iotest.DataErrReader, len(data)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(data)
			if tt.reader != nil {
				r = tt.reader(r)
			}
			orig := &peekCloseRecorder{Reader: r}
			resp := &http.Response{StatusCode: http.StatusOK, Body: orig}

			prefix, err := PeekBody(resp, tt.limit)
			require.NoError(t, err)
			require.Len(t, prefix, tt.want)
			require.True(t, bytes.Equal(data[:tt.want], prefix), "prefix differs from the body's start")

			all, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, all), "restored body differs: %d bytes, want %d", len(all), len(data))
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, 1, orig.closed, "Close calls on the original body")
		})
	}
}

func TestPeekBodyTwice(t *testing.T) {
	data := randomPayload(t, 1<<20)
	orig := &peekCloseRecorder{Reader: iotest.HalfReader(bytes.NewReader(data))}
	resp := &http.Response{StatusCode: http.StatusBadRequest, Body: orig}

	for _, limit := range []int64{10, 100_000, 5, 0, 100_000} {
		prefix, err := PeekBody(resp, limit)
		require.NoError(t, err)
		want := int(limit)
		if limit <= 0 {
			want = DefaultPeekLimit
		}
		require.True(t, bytes.Equal(data[:want], prefix), "PeekBody(limit %d) = %d bytes, not the body's first %d", limit, len(prefix), want)
		_, wrapped := resp.Body.(*peekedBody)
		require.True(t, wrapped)
		require.Same(t, orig, resp.Body.(*peekedBody).rc, "PeekBody wrapped its own wrapper")
	}
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, all), "restored body differs")
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, 1, orig.closed)
}

func TestPeekBodyAfterPartialRead(t *testing.T) {
	data := randomPayload(t, 10_000)
	resp := &http.Response{Body: io.NopCloser(bytes.NewReader(data))}
	_, err := PeekBody(resp, 100)
	require.NoError(t, err)

	head := make([]byte, 30)
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)
	prefix, err := PeekBody(resp, 200)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data[30:230], prefix), "second peek is not the next unread bytes")

	_, err = io.ReadFull(resp.Body, make([]byte, 300)) // past the whole prefix
	require.NoError(t, err)
	require.Nil(t, resp.Body.(*peekedBody).buf, "the prefix is kept after it was read")
	prefix, err = PeekBody(resp, 50)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data[330:380], prefix), "peek after the prefix was read")

	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data[330:], rest))
}

func TestPeekBodyReadError(t *testing.T) {
	errRead := errors.New("connection lost")
	data := randomPayload(t, 3000)
	newResp := func() *http.Response {
		body := io.MultiReader(bytes.NewReader(data), iotest.ErrReader(errRead))
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: io.NopCloser(body)}
	}

	t.Run("error within the limit", func(t *testing.T) {
		resp := newResp()
		prefix, err := PeekBody(resp, 10_000)
		require.ErrorIs(t, err, errRead)
		require.True(t, bytes.Equal(data, prefix), "bytes before the error")

		again, err := PeekBody(resp, 20_000)
		require.ErrorIs(t, err, errRead)
		require.True(t, bytes.Equal(data, again))

		all, err := io.ReadAll(resp.Body)
		require.ErrorIs(t, err, errRead, "the reader gets the same error")
		require.True(t, bytes.Equal(data, all), "the reader gets the same bytes first")
	})
	t.Run("error past the limit", func(t *testing.T) {
		resp := newResp()
		prefix, err := PeekBody(resp, 1000)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data[:1000], prefix))
		all, err := io.ReadAll(resp.Body)
		require.ErrorIs(t, err, errRead)
		require.True(t, bytes.Equal(data, all))
	})
	t.Run("error then data", func(t *testing.T) {
		// TimeoutReader fails its second read and succeeds again after:
		// the restored body repeats that sequence.
		resp := &http.Response{Body: io.NopCloser(iotest.TimeoutReader(bytes.NewReader(data)))}
		prefix, err := PeekBody(resp, 10_000)
		require.ErrorIs(t, err, iotest.ErrTimeout)
		require.NotEmpty(t, prefix)
		require.True(t, bytes.Equal(data[:len(prefix)], prefix))

		head, err := io.ReadAll(resp.Body)
		require.ErrorIs(t, err, iotest.ErrTimeout)
		require.True(t, bytes.Equal(prefix, head), "bytes before the error")
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data[len(head):], rest), "bytes after the error")
	})
}

// noProgressReader returns (0, nil) forever.
type noProgressReader struct{}

func (noProgressReader) Read([]byte) (int, error) { return 0, nil }

func TestPeekBodyNoProgress(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(noProgressReader{})}
	prefix, err := PeekBody(resp, 10)
	require.ErrorIs(t, err, io.ErrNoProgress)
	require.Empty(t, prefix)
}

// writableBody is a writable body, like that of a 101 Switching Protocols response.
type writableBody struct {
	io.Reader
	io.Writer
}

func (writableBody) Close() error { return nil }

func TestPeekBodyLeavesAlone(t *testing.T) {
	t.Run("nil response", func(t *testing.T) {
		prefix, err := PeekBody(nil, 10)
		assert.NoError(t, err)
		assert.Nil(t, prefix)
	})
	t.Run("nil body", func(t *testing.T) {
		resp := &http.Response{}
		prefix, err := PeekBody(resp, 10)
		assert.NoError(t, err)
		assert.Nil(t, prefix)
		assert.Nil(t, resp.Body)
	})
	t.Run("NoBody", func(t *testing.T) {
		resp := &http.Response{Body: http.NoBody}
		prefix, err := PeekBody(resp, 10)
		assert.NoError(t, err)
		assert.Nil(t, prefix)
		assert.Equal(t, http.NoBody, resp.Body)
	})
	t.Run("writable body", func(t *testing.T) {
		body := writableBody{Reader: iotest.ErrReader(errors.New("must not be read")), Writer: io.Discard}
		resp := &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: body}
		prefix, err := PeekBody(resp, 10)
		assert.NoError(t, err)
		assert.Nil(t, prefix)
		assert.Equal(t, body, resp.Body)
	})
	t.Run("empty body", func(t *testing.T) {
		resp := &http.Response{Body: io.NopCloser(strings.NewReader(""))}
		prefix, err := PeekBody(resp, 10)
		assert.NoError(t, err)
		assert.Empty(t, prefix)
		all, err := io.ReadAll(resp.Body)
		assert.NoError(t, err)
		assert.Empty(t, all)
	})
}

func TestPeekBodyCopy(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(strings.NewReader("Throttling"))}
	prefix, err := PeekBody(resp, 0)
	require.NoError(t, err)
	copy(prefix, "XXXX")
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "Throttling", string(all), "changing the returned slice changed the body")
}

func TestPeekBodyRealResponse(t *testing.T) {
	payload := randomPayload(t, 1<<20)
	srv := quietTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(payload)
	}))
	srv.Start()
	tr := plainTransport(t)

	for i := range 2 { // the second request reuses the connection if the body was read and closed
		resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil))
		require.NoError(t, err)
		prefix, err := PeekBody(resp, 4096)
		require.NoError(t, err)
		require.True(t, bytes.Equal(payload[:4096], prefix), "request %d: prefix", i)
		require.Equal(t, Throttled, DefaultClassifier(Outcome{Response: resp, Attempt: 1}))
		all, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.True(t, bytes.Equal(payload, all), "request %d: restored body", i)
		require.NoError(t, resp.Body.Close())
		_, err = resp.Body.Read(make([]byte, 1))
		require.Error(t, err, "reading after Close")
	}
}

func FuzzPeekBody(f *testing.F) {
	f.Add([]byte("<Error><Code>Throttling</Code></Error>"), int64(5), int64(100), uint8(0))
	f.Add([]byte{}, int64(0), int64(-1), uint8(1))
	f.Add(bytes.Repeat([]byte{0xff}, 3000), int64(1000), int64(10), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, limit1, limit2 int64, mode uint8) {
		var r io.Reader = bytes.NewReader(data)
		switch mode % 3 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.HalfReader(r)
		}
		resp := &http.Response{Body: io.NopCloser(r)}
		for _, limit := range []int64{limit1, limit2} {
			prefix, err := PeekBody(resp, limit)
			if err != nil {
				t.Fatalf("PeekBody(%d) error: %v", limit, err)
			}
			want := limit
			if want <= 0 {
				want = DefaultPeekLimit
			}
			want = min(want, int64(len(data)))
			if !bytes.Equal(data[:want], prefix) {
				t.Fatalf("PeekBody(%d) = %d bytes; want the body's first %d", limit, len(prefix), want)
			}
		}
		all, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(data, all) {
			t.Fatalf("restored body = %d bytes, %v; want %d bytes", len(all), err, len(data))
		}
	})
}
