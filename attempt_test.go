package retry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAttemptTimeout(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		release := make(chan struct{})
		defer close(release)
		var n atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				select { // stall until the attempt is cancelled
				case <-r.Context().Done():
				case <-release:
				}
				return
			}
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			io.WriteString(w, "slow body")
		}))
		var retries []Event
		rt, _ := testTransport(p.base(t, srv), WithAttemptTimeout(50*time.Millisecond), WithOnRetry(func(e Event) { retries = append(retries, e) }))
		defer rt.CloseIdleConnections()
		resp, body, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "slow body", body)
		require.Len(t, retries, 1)
		assert.Equal(t, Transient, retries[0].Class)
		assert.ErrorIs(t, retries[0].Err, context.DeadlineExceeded)
	})
}

// stallProxy forwards loopback TCP connections to a server; while it is
// paused, it stops reading what clients send, so a client's writes fill
// the socket buffers and block, as on a slow or congested path.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	resume chan struct{} // nil when not paused
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		// A small fixed buffer: what a paused proxy holds is bounded by
		// it and the client's send buffer (at most 4 MiB here).
		c.(*net.TCPConn).SetReadBuffer(64 << 10)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(s, c); s.Close() })
		p.wg.Go(func() { io.Copy(c, s); c.Close() })
	}
}

// forward copies the client's bytes to the server, waiting while paused.
func (p *stallProxy) forward(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		p.mu.Lock()
		resume := p.resume
		p.mu.Unlock()
		if resume != nil {
			<-resume
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

func (p *stallProxy) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

func (p *stallProxy) close() {
	p.unpause()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// An attempt timeout that fires while a POST's headers are still being
// written (an 8 MiB header, behind a path that stopped taking bytes) must
// not be taken for "nothing written": over HTTP/2 the HEADERS frame is
// finished after RoundTrip returns, and the server runs the POST. The
// path resumes when the Transport decides (OnRetry or OnGiveUp): a retry
// would then reach the server too, so the server would run the POST twice.
// The POST gives up after one attempt, unsafe to replay, and runs at most
// once (over HTTP/1.1 the connection is closed mid-headers: never).
//
// Bound: one attempt timeout (1s real time: long enough for a retry to get
// through once the path resumes), then the server's handling.
func TestAttemptTimeoutDuringHeaderWrite(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var executed atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			executed.Add(1)
		}))
		proxy := newStallProxy(t, srv.Listener.Addr().String())
		url := strings.Replace(srv.URL, srv.Listener.Addr().String(), proxy.addr(), 1)
		resume := func(Event) { proxy.unpause() }
		var gaveUp giveUps
		rt, _ := hostileTransport(p.base(t, srv), WithAttemptTimeout(time.Second),
			WithOnRetry(resume), WithOnGiveUp(func(e Event) { resume(e); gaveUp.hook(e) }))

		req := mustRequest(t, "POST", url, nil)
		req.Header.Set("X-Pad", strings.Repeat("p", 8<<20))
		// Pause once the first attempt's connection is up (TLS and the
		// HTTP/2 preface went through), before the request is written.
		var once sync.Once
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { once.Do(proxy.pause) },
		}))
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		var re *Error
		if assert.ErrorAs(t, err, &re, "a response came back: the POST was retried") {
			assert.Equal(t, StopUnsafe, re.Reason)
			assert.Equal(t, 1, re.Attempts)
			assert.ErrorIs(t, err, ErrAttemptTimeout)
			assert.Equal(t, Transient, gaveUp.last(t).Class)
		}

		proxy.unpause()
		rt.CloseIdleConnections()
		srv.Close() // waits for the handlers
		assert.LessOrEqual(t, executed.Load(), int32(1), "the POST ran more than once")
	})
}

// The body of a 101 Switching Protocols answer is the connection, which
// the caller writes to: the wrapper that releases the attempt's context
// keeps its write side, with an attempt timeout and for a POST without a
// body (whose attempts have a context of their own). HTTP/1.1 only: HTTP/2
// has no 101.
func TestUpgradeKeepsTheWriteSide(t *testing.T) {
	srv := http1.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(brw, buf); err == nil {
			conn.Write(buf)
		}
	}))
	for _, tt := range []struct {
		name   string
		method string
		opts   []Option
	}{
		{"POST without a body", "POST", nil},
		{"GET with an attempt timeout", "GET", []Option{WithAttemptTimeout(time.Minute)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt, _ := testTransport(http1.base(t, srv), tt.opts...)
			req := mustRequest(t, tt.method, srv.URL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			rw, ok := resp.Body.(io.ReadWriteCloser)
			require.True(t, ok, "the body %T lost its write side", resp.Body)
			_, err = io.WriteString(rw, "ping")
			require.NoError(t, err)
			buf := make([]byte, 4)
			_, err = io.ReadFull(rw, buf)
			require.NoError(t, err)
			assert.Equal(t, "ping", string(buf))
		})
	}
}
