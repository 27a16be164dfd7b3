package startd

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/startd/cgroup"
)

// CgroupAttr is the machine ad's attribute that says whether each job runs
// in cgroups of its own: "v2" or "v1" (the kernel's layout used), or "off"
// when the startd cannot write cgroups (not root, no memory controller);
// CgroupOffAttr then says why.
const (
	CgroupAttr    = "PondJobCgroup"
	CgroupOffAttr = "PondJobCgroupOff"
)

// DefaultBaseCgroup is the default of BASE_CGROUP: the directory, below
// the agent's own cgroup, of its jobs' cgroups.
const DefaultBaseCgroup = "pond"

// KnobJobMaxPids bounds the processes and threads of a job at once (its
// cgroup's pids.max), DefaultJobMaxPids unless set; 0 for no bound.
const (
	KnobJobMaxPids    = "POND_JOB_MAX_PIDS"
	DefaultJobMaxPids = 4096
)

// HoldSubCodeCgroupOOM is the HoldReasonSubCode of a job the kernel killed
// over its cgroup's memory limit (HoldCodeOutOfResources).
const HoldSubCodeCgroupOOM = 0

// abandonedAfter is how long another agent's job's cgroup stays empty
// before a starting startd takes it for abandoned (see SweepAbandoned).
const abandonedAfter = time.Minute

// containment is how the startd contains its jobs in cgroups.
type containment struct {
	mgr     *cgroup.Manager // nil when off
	off     string          // why it is off
	policy  string          // CGROUP_MEMORY_LIMIT_POLICY: hard, soft or none
	maxPids int64
}

// advertise sets CgroupAttr (and CgroupOffAttr) in the machine ad.
func (c containment) advertise(ad *classad.Ad) {
	if c.mgr == nil {
		ad.SetString(CgroupAttr, "off")
		ad.SetString(CgroupOffAttr, c.off)
		return
	}
	ad.SetString(CgroupAttr, c.mgr.Version())
}

// jobContainment reads the cgroup knobs, opens the jobs' cgroup directory
// (named after the execute directory, so that agents of one host keep
// apart and a restarted agent finds what it left) and removes the cgroups
// of jobs an earlier run left. Where cgroups cannot be written it says so
// once, and jobs run without.
func (s *Startd) jobContainment(cfg *config.Config) (containment, error) {
	c := containment{policy: "hard"}
	if v, ok := cfg.Get("CGROUP_MEMORY_LIMIT_POLICY"); ok && strings.TrimSpace(v) != "" {
		c.policy = strings.ToLower(strings.TrimSpace(v))
	}
	switch c.policy {
	case "hard", "soft", "none":
	default:
		return c, fmt.Errorf("CGROUP_MEMORY_LIMIT_POLICY: %q is not hard, soft or none", c.policy)
	}
	n, err := cfg.Int(KnobJobMaxPids, DefaultJobMaxPids)
	if err != nil {
		return c, err
	}
	if n < 0 {
		return c, fmt.Errorf("%s: %d is negative", KnobJobMaxPids, n)
	}
	c.maxPids = int64(n)
	base := DefaultBaseCgroup
	if v, ok := cfg.Get("BASE_CGROUP"); ok && strings.TrimSpace(v) != "" {
		base = strings.Trim(strings.TrimSpace(v), "/")
	}
	if !filepath.IsLocal(base) {
		return c, fmt.Errorf("BASE_CGROUP: %q is not a path below the agent's cgroup", base)
	}
	sum := sha256.Sum256([]byte(s.execute))
	mgr, err := cgroup.Open(filepath.Join(base, "startd-"+hex.EncodeToString(sum[:6])))
	if err != nil {
		c.off = err.Error()
		s.log.Warn("jobs cannot have cgroups of their own here: their memory, CPU and processes are not limited by the kernel, and a process that leaves a job's process tree is not killed with it",
			CgroupAttr, "off", "err", err)
		return c, nil
	}
	left, err := mgr.Sweep()
	if len(left) > 0 {
		s.log.Info("removed the cgroups of jobs of an earlier run", "cgroups", left)
	}
	if err != nil {
		return c, fmt.Errorf("removing the cgroups of jobs of an earlier run: %w", err)
	}
	// Those of agents killed and never started again (their pools
	// destroyed), empty since.
	if gone, err := mgr.SweepAbandoned(abandonedAfter); err != nil {
		s.log.Warn("removing the cgroups other agents abandoned", "err", err)
	} else if len(gone) > 0 {
		s.log.Info("removed the empty cgroups of jobs of agents gone", "cgroups", gone)
	}
	c.mgr = mgr
	s.log.Info("jobs run in cgroups of their own", CgroupAttr, mgr.Version(), "memory_policy", c.policy, "max_pids", c.maxPids)
	return c, nil
}

// jobCgroup is the cgroup of a job of slot slotName, limited as its ad
// asks (the slot's last job's, kept, when the kernel lets its accounting be
// reset and the limits are the same: see cgroup.Manager.Acquire); nil when
// containment is off.
func (c containment) jobCgroup(slotName string, job *classad.Ad) (*cgroup.Group, error) {
	if c.mgr == nil {
		return nil, nil
	}
	lim := cgroup.Limits{MaxPids: c.maxPids, CPUs: job.EvalNumber("RequestCpus", nil, 1)}
	if mem := int64(job.EvalNumber("RequestMemory", nil, 128)); mem > 0 && c.policy != "none" {
		lim.MemoryBytes = mem << 20
		lim.SoftMemory = c.policy == "soft"
	}
	g, err := c.mgr.Acquire(cgroupName(slotName), lim)
	if err != nil {
		return nil, machineFault(err)
	}
	return g, nil
}

// cgroupName is the name of the cgroup of a slot's jobs: the slot's name
// without its host, as HTCondor names a slot's cgroup after the slot.
func cgroupName(slotName string) string {
	n := slotName
	if i := strings.IndexByte(n, '@'); i >= 0 {
		n = n[:i]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			return r
		}
		return '_'
	}, n)
}

// cgroupUse is what supervise keeps of a job's cgroup accounting.
type cgroupUse struct {
	peak, peakRSS int64 // bytes
	cpu           time.Duration
	at            time.Time // of cpu, for CpusUsage
	last          cgroup.Stats
}

// read reads g's accounting, keeping the peaks.
func (u *cgroupUse) read(g *cgroup.Group) (cgroup.Stats, bool) {
	st, err := g.Stats()
	if err != nil {
		return st, false
	}
	u.peak = max(u.peak, st.PeakMemoryBytes, st.MemoryBytes)
	u.peakRSS = max(u.peakRSS, st.RSSBytes)
	u.last = st
	return st, true
}

// mib is bytes in MiB, rounded up.
func mib(b int64) int64 { return (b + 1<<20 - 1) >> 20 }

// oomHoldReason is HTCondor's hold reason of a job killed over its cgroup's
// memory limit.
func oomHoldReason(slotName string, limit, peak int64) string {
	return fmt.Sprintf("Error from %s: Job has gone over cgroup memory limit of %d megabytes. Peak usage: %d megabytes.  Consider resubmitting with a higher request_memory.",
		slotName, mib(limit), mib(peak))
}
