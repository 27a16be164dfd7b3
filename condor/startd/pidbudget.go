package startd

import (
	"fmt"
	"math/bits"

	"github.com/pond-htc/pond/condor/hostinfo"
	"github.com/pond-htc/pond/condor/startd/jobshim"
)

// Every thread of the host takes a process id, bounded by kernel.pid_max,
// kernel.threads-max and the pids.max of the agent's cgroup; once they are
// used up, fork and clone fail with EAGAIN and jobs cannot start. The
// startd estimates at start what its slots need, and says so once when the
// host cannot give it.

// jobPIDs is how many process ids the estimate counts for a job's own
// processes and threads: a wrapper shell, the program and a few threads
// of it. Many jobs need more.
const jobPIDs = 8

// subreaperSupervisorThreads is how many threads the supervisor of one job
// without a PID namespace has while its job runs, as measured: it waits
// for its job's processes and for the startd's signals on threads of their
// own. In a PID namespace it has a resident supervisor's few.
const subreaperSupervisorThreads = 8

// maxPIDMax is the largest kernel.pid_max a 64-bit kernel takes.
const maxPIDMax = 1 << 22

// pidBudget is the estimate of the process ids the startd's jobs need when
// every slot runs one, against what the host has free.
type pidBudget struct {
	jobs   int   // jobs at once: a static slot's one, a partitionable slot's one a cpu
	perJob int   // ids a job: its supervisor's threads and jobPIDs
	need   int64 // jobs times perJob
	free   int64 // ids free under the tightest bound
	bound  string
	raise  string // how to raise the bound
}

// short says that the slots' jobs need more process ids than are free.
func (b pidBudget) short() bool { return b.need > b.free }

// estimatePIDs estimates what jobs jobs at once, each under a supervisor
// of supervisorThreads threads, need of the host's process ids ids.
func estimatePIDs(ids hostinfo.ProcessIDs, jobs, supervisorThreads int) pidBudget {
	b := pidBudget{jobs: jobs, perJob: supervisorThreads + jobPIDs}
	b.need = int64(jobs) * int64(b.perJob)
	want := ids.InUse + b.need
	b.free = ids.PIDMax - hostinfo.ReservedPIDs - ids.InUse
	b.bound = "kernel.pid_max"
	b.raise = fmt.Sprintf("sysctl -w kernel.pid_max=%d", min(maxPIDMax, roundPow2(want+hostinfo.ReservedPIDs)))
	if f := ids.ThreadsMax - ids.InUse; f < b.free {
		b.free, b.bound = f, "kernel.threads-max"
		b.raise = fmt.Sprintf("sysctl -w kernel.threads-max=%d", want)
	}
	if ids.CgroupMax > 0 {
		if f := ids.CgroupMax - ids.CgroupInUse; f < b.free {
			b.free, b.bound = f, "pids.max of the agent's cgroup "+ids.Cgroup
			b.raise = fmt.Sprintf("echo %d > %s/pids.max (under systemd: TasksMax= of the agent's unit)", ids.CgroupInUse+b.need, ids.Cgroup)
		}
	}
	b.free = max(b.free, 0)
	return b
}

// roundPow2 is the least power of two of at least n (n > 0).
func roundPow2(n int64) int64 {
	if n <= 1 {
		return 1
	}
	return 1 << (64 - bits.LeadingZeros64(uint64(n-1)))
}

// jobsAtOnce is how many jobs the startd's slots run at most at once: one
// a static slot, one a cpu of a partitionable slot.
func (s *Startd) jobsAtOnce() int {
	n := 0
	for _, sl := range s.slots {
		if sl.partitionable {
			n += max(1, sl.totalCpus)
		} else {
			n++
		}
	}
	return n
}

// supervisorThreads is the threads of a job's supervisor here.
func (iso isolation) supervisorThreads() int {
	if iso.pidNS {
		return jobshim.ResidentThreads
	}
	return subreaperSupervisorThreads
}

// checkProcessIDs says once, at start, when the host has fewer process ids
// free than the slots' jobs need (see warnProcessIDs).
func (s *Startd) checkProcessIDs() {
	ids, err := hostinfo.ReadProcessIDs()
	if err != nil {
		s.log.Warn("cannot read the host's bounds on process ids", "err", err)
		return
	}
	s.warnProcessIDs(ids)
}

// checkJobMaxPids says once, at start, when POND_JOB_MAX_PIDS leaves a job
// no room to start: the job's supervisor is in the job's cgroup, with its
// threads, while it forks the job, and a job that cannot start goes back
// to the queue again and again.
func (s *Startd) checkJobMaxPids() {
	if threads := s.iso.supervisorThreads(); s.cont.mgr != nil && s.cont.maxPids > 0 && s.cont.maxPids <= int64(threads) {
		s.log.Warn(KnobJobMaxPids+" leaves a job no process: its supervisor's threads count in the job's cgroup while it starts the job, and no job can start",
			KnobJobMaxPids, s.cont.maxPids, "supervisor_threads", threads)
	}
}

// warnProcessIDs logs a warning, naming the bound and how to raise it, when
// the host's process ids ids are fewer than the slots' jobs need; it
// reports whether it did.
func (s *Startd) warnProcessIDs(ids hostinfo.ProcessIDs) bool {
	b := estimatePIDs(ids, s.jobsAtOnce(), s.iso.supervisorThreads())
	if !b.short() {
		return false
	}
	s.log.Warn("the host has too few process ids for every slot to run a job: jobs fail to start (fork: resource temporarily unavailable) once they run out, and go back to the queue; "+
		"raise "+b.bound+" (the agents of one host, and their jobs, share it)",
		"jobs_at_once", b.jobs, "ids_a_job", b.perJob, "ids_needed", b.need, "ids_free", b.free, "raise", b.raise,
		"pid_max", ids.PIDMax, "threads_max", ids.ThreadsMax, "threads_in_use", ids.InUse, "cgroup_pids_max", ids.CgroupMax)
	return true
}

// pidShortage is the log's attributes of the host's process ids now, for
// a job that could not start for want of one.
func pidShortage() []any {
	ids, err := hostinfo.ReadProcessIDs()
	if err != nil {
		return []any{"ids_err", err}
	}
	return []any{"pid_max", ids.PIDMax, "threads_max", ids.ThreadsMax, "threads_in_use", ids.InUse,
		"cgroup_pids_max", ids.CgroupMax, "cgroup_pids_in_use", ids.CgroupInUse}
}
