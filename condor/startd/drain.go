package startd

import (
	"context"
	"time"
)

// drainPoll is how often Drain looks for jobs that have ended.
const drainPoll = 100 * time.Millisecond

// DrainResult says what a drain did.
type DrainResult struct {
	// Finished is how many jobs ran to their end while the startd drained.
	Finished int `json:"finished"`
	// Evicted is how many jobs were stopped and handed back to their schedd
	// to run elsewhere.
	Evicted int `json:"evicted"`
	// Took is how long the drain lasted.
	Took time.Duration `json:"took"`
}

// Drain stops the startd from taking claims or starting jobs, as
// condor_drain does, and returns once no job runs on it: at once after
// evicting every running job when evict is true, otherwise when the running
// jobs have ended by themselves, or, if ctx ends first, after evicting
// those still running. Evicted jobs go back to their schedd's queue as idle
// jobs. Idle claims are released. The startd stays drained until Resume.
func (s *Startd) Drain(ctx context.Context, evict bool) DrainResult {
	began := time.Now()
	s.mu.Lock()
	s.draining = true
	initial := 0
	for _, sl := range s.claims {
		if sl.run != nil {
			initial++
		}
	}
	s.mu.Unlock()
	s.markDirty()
	var res DrainResult
	for {
		var runs []*run
		reporting := 0
		s.mu.Lock()
		for _, sl := range s.claims {
			switch {
			case sl.partitionable || sl.state != "Claimed":
			case sl.run != nil:
				runs = append(runs, sl.run)
			case sl.reporting:
				// Released once its report is delivered; waited for
				// unless the drain's time is up (a schedd that does not
				// answer keeps a report for REPORT_RETRY_TIME).
				sl.retire = true
				if ctx.Err() == nil {
					reporting++
				}
			default:
				// An idle claim: nothing more runs on it while drained.
				s.releaseLocked(sl)
			}
		}
		s.mu.Unlock()
		if len(runs) == 0 && reporting == 0 {
			break
		}
		if evict || ctx.Err() != nil {
			for _, r := range runs {
				if !r.vacated.Load() {
					r.vacated.Store(true)
					r.kill("the machine is draining")
					res.Evicted++
				}
			}
		}
		select {
		case <-s.stop.Done():
			res.Took = time.Since(began)
			return res
		case <-time.After(drainPoll):
		}
	}
	res.Finished = max(0, initial-res.Evicted)
	res.Took = time.Since(began)
	return res
}

// Resume ends a drain: the slots take claims again.
func (s *Startd) Resume() {
	s.mu.Lock()
	s.draining = false
	s.mu.Unlock()
	s.markDirty()
}
