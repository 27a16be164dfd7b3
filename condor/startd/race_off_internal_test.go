//go:build !race

package startd

// raceDetector says the tests are built with the race detector.
const raceDetector = false
