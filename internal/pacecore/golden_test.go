package pacecore

import (
	"flag"
	"testing"

	"github.com/backoff-jitter/retry/internal/pacesim"
)

var (
	updateGolden = flag.Bool("update", false, "rewrite internal/pacesim/golden.txt from the current build")
	traceName    = flag.String("trace", "", "write the full trace of this golden scenario to testdata/traces/")
)

// TestGoldenTraces runs every golden scenario (see package pacesim) on
// the core, stepped for every event, and compares each trace with the
// recorded one. Package pace's Pacer and package redispace's replay the
// same scenarios through their own drivers.
func TestGoldenTraces(t *testing.T) {
	pacesim.Check(t, newKey, nil, *updateGolden, *traceName)
}
