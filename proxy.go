package retry

import (
	"context"
	"net/http"
	"net/url"
)

// ProxyConnectError is the error of an attempt whose proxy refused to open
// a tunnel to the server: its answer to CONNECT was not 200 OK. Nothing
// reached the server. [DefaultClassifier] takes the proxy's authentication
// or policy refusal (407, 403, 400 and the other statuses it would never
// retry) as [Permanent], and a proxy that could not reach the server or
// was overloaded (502, 503, 504, 429 and the other statuses it would
// retry) as [Unsent].
type ProxyConnectError struct {
	// Proxy is the proxy's host and port; Target the server's.
	Proxy, Target string
	// StatusCode and Status are the proxy's answer to CONNECT.
	StatusCode int
	Status     string
	// Header is the header of the proxy's answer (Proxy-Authenticate,
	// for a 407).
	Header http.Header
}

func (e *ProxyConnectError) Error() string {
	return "retry: proxy " + e.Proxy + " refused a tunnel to " + e.Target + ": " + e.Status
}

// ProxyConnectResponse is a hook for [http.Transport.OnProxyConnectResponse]
// that turns a proxy's refusal to open a tunnel (any answer to CONNECT but
// 200 OK) into a [*ProxyConnectError], which [DefaultClassifier] can sort.
// Without it net/http reports the refusal as an error of no type that
// cannot be told from a lost connection, and the Transport retries it.
//
// A Transport whose Base is nil installs it on its own base. Install it on
// a base of your own, which the Transport does not change, when requests
// go through a proxy:
//
//	base := cleanhttp.DefaultPooledTransport()
//	base.OnProxyConnectResponse = retry.ProxyConnectResponse
//	rt := retry.New(base)
func ProxyConnectResponse(_ context.Context, proxyURL *url.URL, connectReq *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	e := &ProxyConnectError{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header}
	if proxyURL != nil {
		e.Proxy = proxyURL.Host // not its user and password
	}
	if connectReq != nil {
		e.Target = connectReq.Host
	}
	return e
}
