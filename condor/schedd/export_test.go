package schedd

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// RaceDetector says the tests are built with the race detector.
const RaceDetector = raceDetector

// SamplePeakHeap samples the heap every millisecond until the function
// it returns is called, which returns the most heap held over what was
// held at the start.
func SamplePeakHeap() func() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return max(peak, base) - base
	}
}
