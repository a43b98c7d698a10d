//go:build race

package retry

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
