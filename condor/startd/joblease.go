package startd

import (
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// A running job's claim is renewed with its schedd every ALIVE_INTERVAL.
// A startd that cannot renew it keeps the job running until its job lease
// (JobLeaseDuration, as HTCondor's starter does) has run out since the
// last renewal the schedd accepted, whatever stops the renewals: a schedd
// down or restarting, a partition, a firewall. Its schedd, restarted,
// reconnects to the job at the starter's next report; cut off, it waits
// for the job lease before it runs the job elsewhere, unless it knows the
// worker dead (condor/schedd/lost.go). The job lease is never shorter than
// the claim lease.

// DefaultJobLease is HTCondor's JobLeaseDuration: how long a job whose
// schedd cannot be reached keeps running after its last contact, unless
// the job (job_lease_duration) or the pool (JOB_LEASE_DURATION) says
// otherwise.
const DefaultJobLease = 2400 * time.Second

// JobLease returns the job lease of a job: its JobLeaseDuration, else the
// pool's JOB_LEASE_DURATION, else DefaultJobLease; and at least
// claimLease.
func JobLease(cfg *config.Config, job *classad.Ad, claimLease time.Duration) time.Duration {
	lease := DefaultJobLease
	if v, ok := jobLeaseAttr(job); ok {
		lease = v
	} else if cfg != nil {
		if d, err := cfg.Duration("JOB_LEASE_DURATION", DefaultJobLease); err == nil && d > 0 {
			lease = d
		}
	}
	return max(lease, claimLease)
}

// jobLeaseAttr is a job's JobLeaseDuration, if it has a positive one.
func jobLeaseAttr(job *classad.Ad) (time.Duration, bool) {
	if job == nil {
		return 0, false
	}
	v, ok := job.EvalAttr("JobLeaseDuration").IntValue()
	if !ok || v <= 0 {
		return 0, false
	}
	return time.Duration(v) * time.Second, true
}
