package startd

import (
	"errors"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// A running job's claim is renewed with its schedd every ALIVE_INTERVAL;
// one the startd could not renew for the claim lease
// (ClaimLease) is killed, because its schedd, when alive and cut off
// from the startd, requeues the job after that lease (and one interval
// more) to run it elsewhere. A schedd that is down requeues nothing: the
// schedd started again reconnects to its running jobs (it finds them in
// its queue) and requeues those not heard of within the job's lease
// (JobLeaseDuration), counted from its start. So the startd keeps a job
// whose schedd is down running until the job lease, counted from the last
// renewal, runs out, as HTCondor's startd does; and it keeps the claim
// lease whenever the schedd may be alive.
//
// Down means the startd's renewal reached the schedd's host and nothing
// listened there (the connection was refused): the schedd's process that
// accepted the last renewal is gone, and any schedd after it recovered
// the job from its queue. A renewal that goes unanswered (a partition, a
// host down) says nothing of the schedd: the claim lease holds. The
// refusal counts only when it came after the last renewal the schedd
// accepted, and before the claim lease ran out since: by then a live
// schedd could have requeued the job.

// DefaultJobLease is HTCondor's JobLeaseDuration: how long a job whose
// schedd is down keeps running after its last contact, unless the job
// (job_lease_duration) or the pool (JOB_LEASE_DURATION) says otherwise.
const DefaultJobLease = 2400 * time.Second

// JobLease returns the job lease of a job: its JobLeaseDuration, else the
// pool's JOB_LEASE_DURATION, else DefaultJobLease.
func JobLease(cfg *config.Config, job *classad.Ad) time.Duration {
	if job != nil {
		if v, ok := job.EvalAttr("JobLeaseDuration").IntValue(); ok && v > 0 {
			return time.Duration(v) * time.Second
		}
	}
	if cfg != nil {
		if d, err := cfg.Duration("JOB_LEASE_DURATION", DefaultJobLease); err == nil && d > 0 {
			return d
		}
	}
	return DefaultJobLease
}

// refused reports whether err says that nothing listens at the address
// called.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// accepted records that the schedd accepted a renewal, whose answer came
// at t.
func (w *watch) accepted(t time.Time) {
	for {
		old := w.answered.Load()
		if old >= t.UnixNano() || w.answered.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

// wasRefused records that a renewal attempt started at sent found no
// schedd listening.
func (w *watch) wasRefused(sent time.Time) {
	for {
		old := w.refused.Load()
		if old >= sent.UnixNano() || w.refused.CompareAndSwap(old, sent.UnixNano()) {
			return
		}
	}
}

// scheddDown reports whether the job's schedd is known down since its
// last accepted renewal, before claimLease ran out (see above).
func (w *watch) scheddDown(claimLease time.Duration) bool {
	r := w.refused.Load()
	return r > w.answered.Load() && r <= w.renewed.Load()+int64(claimLease)
}
