//go:build !race

package schedd

// raceDetector says the tests are built with the race detector (see
// race_on_internal_test.go).
const raceDetector = false
