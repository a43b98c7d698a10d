package retry

import (
	"context"
	"net/http"
)

type requestKeyKey struct{}

// RequestKey returns the key a [Transport] gave req: what its Key returned
// for the call req belongs to, else req's host (URL.Host). The Transport's
// own Pacer, its hedging's latency window, and a pace.Pacer or
// breaker.Breaker without a Key of their own count req against this key,
// so one Transport.Key keys them all.
func RequestKey(req *http.Request) string {
	if k, ok := req.Context().Value(requestKeyKey{}).(string); ok {
		return k
	}
	if req.URL == nil {
		return ""
	}
	return req.URL.Host
}

// withKey returns req carrying the key s.key gives it, for RequestKey: a
// copy with a context of its own, made only when the Transport has a Key.
func (s *settings) withKey(req *http.Request) *http.Request {
	if s.key == nil {
		return req
	}
	return req.WithContext(context.WithValue(req.Context(), requestKeyKey{}, s.key(req)))
}
