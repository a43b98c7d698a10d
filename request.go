package retry

import (
	"net/http"
)

// ReplaySafe reports whether sending req more than once is safe: its method
// is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT and DELETE;
// an empty method means GET), or its header has an "Idempotency-Key" or
// "X-Idempotency-Key" entry, the keys net/http's Transport also honours,
// with a key the server can deduplicate on: every value not empty (nor
// only spaces and tabs). As in net/http, an entry with no values (nil)
// counts too: the request is marked safe without sending the header. An
// empty key does not: the server would receive a key it cannot tell from
// another request's. Methods are case-sensitive: "get" is not GET.
//
// ReplaySafe looks at semantics only; whether the body can be sent again is
// the [Transport]'s business. A nil req is not safe.
func ReplaySafe(req *http.Request) bool {
	if req == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	// Exact keys, as net/http looks them up: a key set with Header.Set or
	// Header.Add is canonical.
	return idempotencyKey(req.Header, "Idempotency-Key") || idempotencyKey(req.Header, "X-Idempotency-Key")
}

// idempotencyKey reports whether h's entry for key marks a request safe:
// present with no values (net/http's convention), or with none empty.
func idempotencyKey(h http.Header, key string) bool {
	vs, ok := h[key]
	if !ok {
		return false
	}
	for _, v := range vs {
		if trimFieldOWS(v) == "" {
			return false
		}
	}
	return true
}

// sendable reports whether net/http's Transport would try to send req,
// mirroring the checks it makes before dialing.
func sendable(req *http.Request) bool {
	u := req.URL
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || req.Header == nil {
		return false
	}
	if req.Method != "" && !isToken(req.Method) {
		return false
	}
	for _, h := range []http.Header{req.Header, req.Trailer} {
		for k, vs := range h {
			if !isToken(k) {
				return false
			}
			for _, v := range vs {
				if !validHeaderValue(v) {
					return false
				}
			}
		}
	}
	return true
}

// isToken reports whether s is a token (RFC 9110 §5.6.2): a method or a
// field name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tchar[s[i]] {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether net/http would send v as a field value:
// no control characters but horizontal tab (RFC 9110 §5.5).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// isTchar reports whether c is a tchar of RFC 9110 §5.6.2, the characters
// of a token: of a method or field name here, and of a Structured Field
// token (RFC 9651 §3.3.4) in sfv.go.
func isTchar(c byte) bool { return tchar[c] }

// tchar is the table of tchars behind isTchar and isToken.
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
