// Package faults holds the fault-injection, hostile-network and soak tests
// of [github.com/backoff-jitter/retry]: an in-process toxiproxy between the
// client and a recording server on loopback, a raw HTTP/2 server that sends
// GOAWAY, and a bounded soak run. It is a module of its own so that
// toxiproxy and golang.org/x/net stay out of the root module's go.mod.
//
// It has no API: everything is in its tests.
package faults
