//go:build race

package startd

// raceDetector says the tests are built with the race detector, whose
// shadow memory makes heap figures meaningless: the heap-bound tests run
// without it (make allocs).
const raceDetector = true
