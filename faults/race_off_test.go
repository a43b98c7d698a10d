//go:build !race

package faults

// raceDetector reports whether the tests run under the race detector.
const raceDetector = false
