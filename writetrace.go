package retry

import (
	"context"
	"errors"
	"net/http/httptrace"
	"sync/atomic"
)

// WriteState is how much of an attempt's request the base transport wrote,
// as [net/http/httptrace] reported it.
type WriteState uint8

const (
	// WriteUnknown means the request may have been written, in part or in
	// whole: a connection was handed to it, and the trace says no more.
	// It is also the state when no trace was installed: the Transport
	// installs one only where the answer matters, for requests that are
	// not safe to replay.
	WriteUnknown WriteState = iota
	// WroteNothing means nothing of the request was written: the base
	// transport asked for a connection and none was handed to the
	// request. It is the only state that proves a request unsent, over
	// HTTP/1.1 and HTTP/2 alike.
	WroteNothing
	// WroteHeaders means the headers, and maybe part of the body, were written.
	WroteHeaders
	// WroteRequest means the whole request was written.
	WroteRequest
)

// errReplayStopped is the cause of an attempt's context when the base
// transport began to send an unsafe request again by itself: net/http's
// HTTP/2 client replays a request without a body after a stream reset,
// PROTOCOL_ERROR included, after which the server may have processed it.
var errReplayStopped = errors.New("retry: the base transport began to send the request again by itself after a stream reset; " +
	"stopped, since the request is not safe to replay and the server may have processed it")

// Progress bits of a writeTrace.
const (
	traceGetConn      uint32 = 1 << iota // the base asked for a connection
	traceGotConn                         // a connection was handed to the request
	traceWroteHeaders                    // the headers were written
	traceWroteRequest                    // the whole request was written, without error
)

// writeTrace records, from httptrace, how much of a request the base
// transport may have written, and stops it from sending the request a
// second time. Its hooks run on the base transport's goroutines, which may
// outlive RoundTrip, hence the atomics.
//
// Nothing was written is proven only by a base that asked for a connection
// (GetConn: it reports progress) and never got one. Once a connection is
// handed over, the request may be on the wire whatever else the trace says:
// net/http's HTTP/2 client reports WroteHeaders only after the HEADERS
// frame was flushed, and RoundTrip may return on the context while that
// flush is still under way.
type writeTrace struct {
	v     atomic.Uint32
	stop  context.CancelCauseFunc // ends the attempt's context; nil when nothing can replay it
	hooks httptrace.ClientTrace   // in the same allocation
}

func newWriteTrace(stop context.CancelCauseFunc) *writeTrace {
	w := &writeTrace{stop: stop}
	w.hooks = httptrace.ClientTrace{
		GetConn: func(string) { w.v.Or(traceGetConn) },
		GotConn: func(httptrace.GotConnInfo) {
			// A connection for a request whose whole body was written
			// already is a replay by the base itself (HTTP/1.1 replays
			// only requests that wrote nothing, which report an error).
			// The hook runs before the request is handed to that
			// connection, so the request's context is done before a
			// byte of it is written.
			if w.v.Or(traceGotConn)&traceWroteRequest != 0 && w.stop != nil {
				w.stop(errReplayStopped)
			}
		},
		WroteHeaders: func() { w.v.Or(traceWroteHeaders) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				w.v.Or(traceWroteRequest)
			}
		},
	}
	return w
}

// state reports how much of the request was written; WriteUnknown when it
// may have been written but the trace cannot say how much.
func (w *writeTrace) state() WriteState {
	if w == nil {
		return WriteUnknown
	}
	v := w.v.Load()
	switch {
	case v&traceWroteRequest != 0:
		return WroteRequest
	case v&traceWroteHeaders != 0:
		return WroteHeaders
	case v&traceGotConn != 0:
		return WriteUnknown
	case v&traceGetConn != 0:
		return WroteNothing
	}
	return WriteUnknown
}
