package startd

import (
	"fmt"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// KnobMaxJobs is how many jobs the machine starts in its life (a pilot
// that runs at most N jobs, such as a glidein's max_jobs); 0 or nothing
// for no limit. Once it has started them it takes no claim and no
// activation, its slots advertise Draining and match no job, each claim
// ends with its job, and JobsSpent reports true once none runs.
const KnobMaxJobs = "POND_MAX_JOBS"

// maxJobsStart is what the startd adds to its START policy for
// POND_MAX_JOBS: a machine that has started its jobs matches none.
const maxJobsStart = `(MY.PondMaxJobs =?= undefined || MY.PondMaxJobs <= 0 || (MY.PondJobStarts ?: 0) < MY.PondMaxJobs)`

// spentLocked reports whether the machine has started the POND_MAX_JOBS
// jobs of its life. s.mu must be held.
func (s *Startd) spentLocked() bool {
	return s.health.maxJobs > 0 && s.jobStarts >= s.health.maxJobs
}

// spentError is why a machine that has started its jobs refuses another.
// s.mu must be held.
func (s *Startd) spentError() error {
	return fmt.Errorf("%w: the machine has started the %d jobs of its life (%s) and takes no more", wire.ErrConflict,
		s.health.maxJobs, KnobMaxJobs)
}

// noteStartLocked counts a job the machine takes (an activation it
// accepted). With the last of POND_MAX_JOBS, every claim ends: the idle
// ones at once, the others once their job's report is sent, so that no
// schedd runs another job on them. s.mu must be held.
func (s *Startd) noteStartLocked() {
	s.jobStarts++
	if !s.spentLocked() {
		return
	}
	s.log.Info("the machine has started the jobs of its life: taking no more", "max_jobs", s.health.maxJobs)
	for _, sl := range s.claims {
		switch {
		case sl.partitionable || sl.state != "Claimed":
		case sl.run != nil || sl.reporting:
			sl.retire = true
		default:
			s.releaseLocked(sl)
		}
	}
	s.markDirty()
}

// JobsSpent reports whether the machine has started the POND_MAX_JOBS
// jobs of its life and none of them still runs or reports its end: a
// glidein leaves then.
func (s *Startd) JobsSpent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spentLocked() && !s.jobsRunLocked()
}

// JobStarts returns how many jobs the machine has taken since it
// started.
func (s *Startd) JobStarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobStarts
}

// maxJobsAttrs sets PondMaxJobs and PondJobStarts on a slot ad when the
// machine has POND_MAX_JOBS. s.mu must be held.
func (s *Startd) maxJobsAttrs(ad *classad.Ad) {
	if s.health.maxJobs > 0 {
		ad.SetInt("PondMaxJobs", int64(s.health.maxJobs))
		ad.SetInt("PondJobStarts", int64(s.jobStarts))
	}
}
