package pace

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/memstore"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/backoff-jitter/retry/internal/pacesim/storesim"
)

var (
	update = flag.Bool("update", false, "rewrite internal/pacesim/golden.txt from the traces")
	trace  = flag.String("trace", "", "write the whole trace of the scenario of this name to testdata/traces/")
)

// memKey returns a simulated key of a memory store on the simulator's
// clock: package redispace replays the same scenarios through Redis.
func memKey(setup pacesim.Setup) pacesim.Key {
	var now time.Time
	s := pacecore.Config{InitialWindow: setup.InitialWindow}
	if setup.AIMD {
		s.Adapt = pacecore.AIMD
	}
	store := &memstore.Store{
		Config: s.Defaulted(),
		Now:    func() time.Time { return now },
		Sleep:  func(context.Context, time.Duration) error { return nil }, // the simulator moves the clock
	}
	return &storesim.Key{Store: store, Name: "api.example", Set: func(t time.Time) { now = t },
		Read: func() pacesim.State {
			var st pacesim.State
			store.Peek("api.example", func(s *pacecore.State, now time.Time) {
				st = pacesim.State{Rate: s.Rate(now), Engaged: s.Engaged(), Mode: uint8(s.Mode()), Gen: s.Gen()}
			})
			return st
		}}
}

// TestGoldenTraces pins what the Pacer decides in every golden scenario,
// step by step; a change of behaviour is recorded with -update once it
// passes its gates.
func TestGoldenTraces(t *testing.T) {
	pacesim.Check(t, memKey, nil, *update, *trace)
}
