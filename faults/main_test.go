package faults

import (
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// TestMain fails the module's tests when any goroutine outlives them, and
// silences toxiproxy's global logger (its bandwidth toxic logs through it),
// so that the tests print nothing.
func TestMain(m *testing.M) {
	zerolog.SetGlobalLevel(zerolog.Disabled)
	goleak.VerifyTestMain(m, toxiproxyLeaks...)
}

// toxiproxyLeaks ignores the goroutines toxiproxy v2.5.0 itself leaks, and
// only those: when a toxic closes its stub (reset_peer, limit_data,
// timeout) while the client is still sending, the stub before it in the
// link's chain (the hidden noop toxic, or a latency, bandwidth or slicer
// toxic) is left blocked for ever sending a chunk on an unbuffered channel
// that nothing reads any more; so is the last toxic of a link whose
// destination was closed under it (link.write returns on a write error
// without draining); and so is, now and then, the link's reader itself,
// blocked in stream.ChanWriter.Write handing the last chunk it read from
// the client to a first toxic that stopped reading (seen once in ten runs
// before and after the HTTP/2 work). These goroutines hold no connection
// (both ends are closed, which the file descriptor count checks) and never
// run code of this module or of package retry, so ignoring them by their
// top function cannot hide a leak of ours.
var toxiproxyLeaks = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*LatencyToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*SlicerToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
}

// discardLog is the ErrorLog of the test servers: a cut connection makes
// net/http's server log, and the tests print nothing.
var discardLog = log.New(io.Discard, "", 0)

// openFDs returns the number of file descriptors the process has open.
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("reading /proc/self/fd: %v", err)
	}
	return len(entries) - 1 // the directory being read is one of them
}

// checkNoLeaks fails t unless, within a few seconds, the process is back
// to at most before open file descriptors and no goroutine but the test's
// own is left. Closing is asynchronous (a connection's goroutines and the
// server's handlers end after Close returns), hence the wait.
func checkNoLeaks(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	fds := openFDs(t)
	for fds > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		fds = openFDs(t)
	}
	if fds > before {
		t.Errorf("%d file descriptors open after the test; %d before", fds, before)
	}
	goleak.VerifyNone(t, toxiproxyLeaks...)
}
