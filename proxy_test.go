package retry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connectProxy is a loopback HTTP proxy that answers CONNECT with status,
// or, for 200, opens the tunnel; it counts the CONNECTs it sees.
type connectProxy struct {
	srv      *httptest.Server
	status   atomic.Int32
	connects atomic.Int32
	tunnels  sync.WaitGroup
}

func newConnectProxy(t *testing.T, status int) *connectProxy {
	p := &connectProxy{}
	p.status.Store(int32(status))
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		p.connects.Add(1)
		if code := int(p.status.Load()); code != http.StatusOK {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			w.WriteHeader(code)
			return
		}
		target, err := net.Dial("tcp", r.Host)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		// Counted before the hijack, while the server still waits for
		// the handler in Close, so that Cleanup's Wait follows the Add.
		p.tunnels.Add(2)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			p.tunnels.Add(-2)
			target.Close()
			return
		}
		io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		pipe := func(dst, src net.Conn) {
			defer p.tunnels.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(target, conn)
		go pipe(conn, target)
	}))
	t.Cleanup(func() {
		p.srv.Close()
		p.tunnels.Wait()
	})
	return p
}

// viaProxy points base at proxy p and makes it trust srv's certificate.
func viaProxy(t *testing.T, base *http.Transport, p *connectProxy, srv *httptest.Server, h2 bool) {
	u, err := url.Parse(p.srv.URL)
	require.NoError(t, err)
	base.Proxy = http.ProxyURL(u)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	base.TLSClientConfig = &tls.Config{RootCAs: pool}
	base.ForceAttemptHTTP2 = h2
	t.Cleanup(base.CloseIdleConnections)
}

// A proxy's refusal to open a tunnel is a ProxyConnectError: its
// authentication or policy refusal is permanent (one CONNECT, for GET and
// POST alike), a proxy that cannot reach the server is unsent (retried for
// every method), and a tunnel it opens works as before. Over TLS HTTP/1.1
// and HTTP/2: CONNECT is how a client reaches an https server through a
// proxy.
func TestProxyRefusal(t *testing.T) {
	for _, p := range []proto{{name: "HTTP1TLS", tls: true}, {name: "h2TLS", h2: true, tls: true}} {
		t.Run(p.name, func(t *testing.T) {
			srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "through")
			}))
			for _, tt := range []struct {
				status   int
				connects int32
				class    Class
				reason   StopReason
			}{
				{407, 1, Permanent, StopPermanent},
				{403, 1, Permanent, StopPermanent},
				{400, 1, Permanent, StopPermanent},
				{502, 4, Unsent, StopAttempts},
				{503, 4, Unsent, StopAttempts},
			} {
				for _, method := range []string{"GET", "POST"} {
					proxy := newConnectProxy(t, tt.status)
					var giveUp Event
					rt, _ := testTransport(nil, WithOnGiveUp(func(e Event) { giveUp = e }))
					s, err := rt.settings()
					require.NoError(t, err)
					viaProxy(t, s.base.(*http.Transport), proxy, srv, p.h2)

					_, err = rt.RoundTrip(mustRequest(t, method, srv.URL, strings.NewReader("x")))
					var pe *ProxyConnectError
					require.ErrorAs(t, err, &pe, "%d %s", tt.status, method)
					assert.Equal(t, tt.status, pe.StatusCode)
					assert.Equal(t, `Basic realm="test"`, pe.Header.Get("Proxy-Authenticate"))
					assert.Equal(t, tt.connects, proxy.connects.Load(), "%d %s: CONNECTs", tt.status, method)
					assert.Equal(t, tt.class, giveUp.Class, "%d %s", tt.status, method)
					assert.Equal(t, tt.reason, giveUp.Reason, "%d %s", tt.status, method)
				}
			}

			// The hook lets an open tunnel through.
			proxy := newConnectProxy(t, http.StatusOK)
			rt, _ := testTransport(nil)
			s, err := rt.settings()
			require.NoError(t, err)
			viaProxy(t, s.base.(*http.Transport), proxy, srv, p.h2)
			resp, body, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
			require.NoError(t, err)
			assert.Equal(t, "through", body)
			assert.Equal(t, p.h2, resp.ProtoMajor == 2)
			assert.EqualValues(t, 1, proxy.connects.Load())
		})
	}
}

// A base of the caller's own is not changed: without the hook, net/http's
// untyped refusal reads as unsent and is retried; with it, it is not.
func TestProxyRefusalOwnBase(t *testing.T) {
	srv := (proto{tls: true}).server(t, http.NotFoundHandler())
	for _, hooked := range []bool{false, true} {
		proxy := newConnectProxy(t, http.StatusProxyAuthRequired)
		base := &http.Transport{}
		if hooked {
			base.OnProxyConnectResponse = ProxyConnectResponse
		}
		viaProxy(t, base, proxy, srv, false)
		rt, _ := testTransport(base)
		_, err := rt.RoundTrip(mustRequest(t, "POST", srv.URL, strings.NewReader("x")))
		require.Error(t, err)
		var pe *ProxyConnectError
		if hooked {
			assert.True(t, errors.As(err, &pe))
			assert.EqualValues(t, 1, proxy.connects.Load())
		} else {
			assert.False(t, errors.As(err, &pe))
			assert.EqualValues(t, 4, proxy.connects.Load(), "documented: a base without the hook retries the refusal")
		}
	}
}

func TestProxyConnectResponse(t *testing.T) {
	u := &url.URL{Scheme: "http", User: url.UserPassword("user", "secret"), Host: "proxy.test:3128"}
	connect := &http.Request{Method: "CONNECT", Host: "api.test:443"}
	require.NoError(t, ProxyConnectResponse(t.Context(), u, connect, &http.Response{StatusCode: 200, Status: "200 OK"}))
	err := ProxyConnectResponse(t.Context(), u, connect, &http.Response{StatusCode: 407, Status: "407 Proxy Authentication Required"})
	assert.EqualError(t, err, "retry: proxy proxy.test:3128 refused a tunnel to api.test:443: 407 Proxy Authentication Required")
	assert.NotContains(t, err.Error(), "secret")
}
