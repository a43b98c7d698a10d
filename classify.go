package retry

import (
	"net/http"
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

// WriteState is how much of an attempt's request the base transport wrote,
// as [net/http/httptrace] reported it.
type WriteState uint8

const (
	// WriteUnknown means no trace was installed for the attempt: the
	// Transport installs one only where the answer matters, for requests
	// that are not safe to replay.
	WriteUnknown WriteState = iota
	// WroteNothing means the headers were never written.
	WroteNothing
	// WroteHeaders means the headers, and maybe part of the body, were written.
	WroteHeaders
	// WroteRequest means the whole request was written.
	WroteRequest
)

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
// [PeekBody]; it must not otherwise consume or close it.
type Classifier func(o Outcome) Class
