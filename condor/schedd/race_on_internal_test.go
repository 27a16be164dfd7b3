//go:build race

package schedd

// raceDetector says the tests are built with the race detector, whose
// shadow memory and slowdown make heap figures meaningless and a queue of
// 20,000 jobs take many minutes: the heap-bound tests run without it
// (make allocs).
const raceDetector = true
