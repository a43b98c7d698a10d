package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
)

// Class is what one attempt's outcome means to the retry loop.
type Class uint8

const (
	// Undecided means a classifier has no opinion: the next classifier
	// of a [Chain] decides, and after the last one [DefaultClassifier].
	Undecided Class = iota
	// Success is a response to return as it is.
	Success
	// Permanent is a failure another attempt would not fix; it is returned at once.
	Permanent
	// Throttled means the server refused the request without processing it
	// (429, 503, a throttling error code). It is retried for every method.
	Throttled
	// Transient means the request failed in a way that may pass, but the
	// server may have processed it (500, 502, 504, a reset after the request
	// was written). It is retried only when a replay is safe.
	Transient
	// Unsent means the request never left the client (dial refused,
	// temporary DNS failure, nothing written). It is retried for every method.
	Unsent
)

// String returns the class's name in lower case ("undecided", "success",
// "permanent", "throttled", "transient", "unsent"), or "Class(n)" for a
// value that is none of the constants.
func (c Class) String() string {
	switch c {
	case Undecided:
		return "undecided"
	case Success:
		return "success"
	case Permanent:
		return "permanent"
	case Throttled:
		return "throttled"
	case Transient:
		return "transient"
	case Unsent:
		return "unsent"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Outcome is one attempt's result as a [Classifier] sees it.
type Outcome struct {
	// Request is the request the attempt sent (a clone of the caller's).
	Request *http.Request
	// Response is the attempt's response; nil when Err is not.
	Response *http.Response
	// Err is the attempt's error; nil when Response is not.
	Err error
	// Attempt is the attempt's number, 1 for the first.
	Attempt int
	// Wrote is how much of the request was written before Err occurred.
	Wrote WriteState
}

// Classifier sorts an attempt's outcome into a [Class]. It returns
// [Undecided] when it has no opinion, so classifiers compose with [Chain].
// A Classifier may read a bounded prefix of the response body with
// [PeekBody]; it must not otherwise consume or close it. A [Transport]
// calls its Classifier from concurrent RoundTrips, so it must be safe for
// concurrent use.
type Classifier func(o Outcome) Class

// Chain returns a [Classifier] that asks each of cs in turn and returns the
// first answer that is not [Undecided]; nil entries are skipped. It returns
// Undecided when every classifier does (or cs is empty), which the
// [Transport] answers with [DefaultClassifier]. So a classifier for one API
// handles only that API's special cases and leaves the rest Undecided.
//
// Chain copies cs: changing the slice afterwards does not change the chain.
// The returned Classifier is safe for concurrent use when each of cs is.
func Chain(cs ...Classifier) Classifier {
	cs = slices.DeleteFunc(slices.Clone(cs), func(c Classifier) bool { return c == nil })
	return func(o Outcome) Class {
		for _, c := range cs {
			if class := c(o); class != Undecided {
				return class
			}
		}
		return Undecided
	}
}

// DefaultClassifier is the [Classifier] the [Transport] uses when no other
// classifier decides. It never answers [Undecided].
//
// A response is classified by its status code:
//
//   - 1xx, 2xx, 3xx: [Success];
//   - 429 Too Many Requests, 503 Service Unavailable: [Throttled];
//   - 408 Request Timeout, and 500, 502, 504 and every other 5xx but 501
//     and 505: [Transient];
//   - 501 Not Implemented, 505 HTTP Version Not Supported, and 400, 401,
//     403, 404 and every other 4xx but 408 and 429: [Permanent];
//   - a code outside 100–599: [Permanent], as it is not HTTP.
//
// An error is classified by its type ([errors.Is], [errors.As]), never by
// its text, first match wins:
//
//   - [Permanent]: the end of the caller's own context (see
//     [ErrAttemptTimeout]) or a closed legacy [http.Request.Cancel];
//     a response that came with the error (http.Client's report that its
//     CheckRedirect refused a redirect, as after 10 redirects);
//     [http.ErrUseLastResponse]; a request net/http refuses to send (no URL
//     or host, a scheme other than http and https, an invalid method or
//     header); TLS certificate verification errors
//     ([*tls.CertificateVerificationError] and the x509 errors it wraps);
//     [tls.RecordHeaderError] and [http.ErrSchemeMismatch] (TLS spoken to a
//     server that speaks plain HTTP); a DNS answer that the host does not
//     exist.
//   - [Unsent]: any other DNS error; a failed dial (connection refused, dial
//     timeout) or proxy connection; an HTTP/2 stream the server refused
//     (REFUSED_STREAM, RFC 9113 §8.7); an attempt timeout or any other error
//     when o.Wrote is [WroteNothing].
//   - [Transient]: everything else, which includes attempt and other
//     timeouts, connection resets, broken pipes and early EOFs after the
//     request was (or may have been) written.
//
// Some failures net/http reports with unexported or untyped errors, which
// cannot be matched by type: an HTTP/2 GOAWAY, a REFUSED_STREAM it could
// not retry itself because the body could not be rewound (it formats the
// stream error into a new one), a server closing an idle connection, a
// malformed response. net/http retries the first three on its own when
// the body allows it. Here they are [Transient], or [Unsent] when o.Wrote
// is WroteNothing.
func DefaultClassifier(o Outcome) Class {
	if o.Err != nil {
		return classifyError(o)
	}
	if o.Response == nil {
		// A RoundTripper that returns neither is broken (http.Client
		// reports it as an error); another attempt will not fix it.
		return Permanent
	}
	return classifyStatus(o.Response.StatusCode)
}

// classifyStatus implements DefaultClassifier's status table.
func classifyStatus(code int) Class {
	switch {
	case code < 100 || code > 599:
		return Permanent // not an HTTP status (RFC 9110 §15): nothing to rely on
	case code < 400:
		return Success
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return Throttled // refused before processing, RFC 6585 §4, RFC 9110 §15.6.4
	case code == http.StatusRequestTimeout:
		return Transient // the server gave up waiting for the request (RFC 9110 §15.5.9)
	case code < 500:
		return Permanent // the request itself is wrong: sending it again will not help
	case code == http.StatusNotImplemented || code == http.StatusHTTPVersionNotSupported:
		return Permanent // the server cannot do this, ever
	default:
		return Transient
	}
}

// classifyError implements DefaultClassifier for a non-nil o.Err, as a
// chain of early returns, most specific first.
func classifyError(o Outcome) Class {
	err := o.Err
	req := o.Request

	if req != nil && callerGone(req) {
		return Permanent // the caller no longer wants the answer
	}
	if o.Response != nil {
		// http.Client returns the last response together with the error
		// when CheckRedirect refuses a redirect (a loop, a policy): the
		// server will redirect the same way again.
		return Permanent
	}
	if errors.Is(err, http.ErrUseLastResponse) {
		return Permanent // a CheckRedirect decision, not a failure to retry
	}
	if req != nil && !sendable(req) {
		// net/http rejects these before sending, with untyped errors, and
		// would reject them the same way on every attempt.
		return Permanent
	}
	if isTLSVerification(err) {
		return Permanent // the certificate will not verify on the next attempt either
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok || errors.Is(err, http.ErrSchemeMismatch) {
		return Permanent // https:// to a server that speaks plain HTTP
	}
	if dnsErr, ok := errors.AsType[*net.DNSError](err); ok {
		if dnsErr.IsNotFound {
			return Permanent // NXDOMAIN: the name does not exist
		}
		// Temporary failures, timeouts and odd answers: the lookup comes
		// before the connection, so nothing was sent.
		return Unsent
	}
	if pe, ok := errors.AsType[*ProxyConnectError](err); ok {
		if c := classifyStatus(pe.StatusCode); c == Throttled || c == Transient {
			return Unsent // the proxy could not reach the server, or is overloaded
		}
		return Permanent // the proxy's authentication or policy refusal
	}
	if failedToConnect(err) {
		return Unsent // no connection, so no request
	}
	if refusedStream(err) {
		return Unsent // RFC 9113 §8.7: a refused stream was not processed
	}
	if o.Wrote == WroteNothing {
		return Unsent // httptrace saw no byte of the request leave
	}
	if timedOut(err) || connectionLost(err) {
		// An attempt timeout, a lower layer's timeout or a lost
		// connection after (maybe) writing: the server may have
		// processed the request, so it is replayed only when safe.
		return Transient
	}
	// An error of no known type. Transient is the conservative answer: the
	// Transport replays it only when that is safe (an idempotent method or
	// an Idempotency-Key), so a POST is never duplicated on a guess, while
	// an idempotent request still survives net/http's many untyped
	// connection errors. Permanent would give up on those; Unsent or
	// Throttled would replay requests the server may have processed.
	return Transient
}

// callerGone reports whether the caller's context ended (other than by an
// attempt timeout), or the caller closed the deprecated req.Cancel channel.
func callerGone(req *http.Request) bool {
	ctx := req.Context()
	if ctx.Err() != nil {
		// The Transport ends an attempt's context itself on two occasions,
		// neither of them the caller's.
		cause := context.Cause(ctx)
		if !errors.Is(cause, ErrAttemptTimeout) && !errors.Is(cause, errReplayStopped) {
			return true
		}
	}
	//lint:ignore SA1019 net/http still honours the deprecated channel.
	if req.Cancel != nil {
		select {
		//lint:ignore SA1019 net/http still honours the deprecated channel.
		case <-req.Cancel:
			return true
		default:
		}
	}
	return false
}

// isTLSVerification reports whether err is a failure to verify the peer's
// certificate chain or name.
func isTLSVerification(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	// Custom VerifyPeerCertificate or DialTLSContext code may return the
	// x509 errors unwrapped.
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnhandledCriticalExtension](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.ConstraintViolationError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.SystemRootsError](err)
	return ok
}

// failedToConnect reports whether err came from dialing the server or the
// proxy in front of it. A dial error may be wrapped in a "proxyconnect"
// one, so the whole chain is searched.
func failedToConnect(err error) bool {
	for err != nil {
		opErr, ok := errors.AsType[*net.OpError](err)
		if !ok {
			return false
		}
		if opErr.Op == "dial" || opErr.Op == "proxyconnect" {
			return true
		}
		err = opErr.Err
	}
	return false
}

// h2StreamError has the shape of net/http's bundled (unexported) HTTP/2
// StreamError, whose As method fills any struct with the same field names
// and convertible types: that is how golang.org/x/net/http2.StreamError
// matches it, and how this package does without importing x/net.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" }

// h2RefusedStream is HTTP/2's REFUSED_STREAM error code (RFC 9113 §7).
const h2RefusedStream = 0x7

// refusedStream reports whether err is an HTTP/2 stream error with the
// REFUSED_STREAM code. net/http retries those itself, up to 7 times, when it
// can rewind the body; the error surfaces only after that.
func refusedStream(err error) bool {
	var se h2StreamError
	return errors.As(err, &se) && se.Code == h2RefusedStream
}

// timedOut reports whether err is a timeout: a [net.Error] saying so
// ([ErrAttemptTimeout], a read deadline's [os.ErrDeadlineExceeded],
// net/http's ResponseHeaderTimeout and Client.Timeout) or a
// [context.DeadlineExceeded] that is not the caller's (callerGone saw to
// those).
func timedOut(err error) bool {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// connectionLost reports whether err is the connection failing under the
// request: a reset or broken pipe (a [*net.OpError] from a read or a write;
// its errno, ECONNRESET, ECONNABORTED or EPIPE, has no portable name in
// package syscall), an early EOF, or a connection closed under it.
func connectionLost(err error) bool {
	if opErr, ok := errors.AsType[*net.OpError](err); ok && (opErr.Op == "read" || opErr.Op == "write") {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
