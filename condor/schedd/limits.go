package schedd

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// limits are the schedd's bounds on its queue and on the jobs it starts,
// as HTCondor's schedd reads them.
type limits struct {
	maxRunning       int           // MAX_JOBS_RUNNING: jobs starting or running at once
	maxSubmitted     int           // MAX_JOBS_SUBMITTED: jobs in the queue
	maxPerOwner      int           // MAX_JOBS_PER_OWNER: jobs of one owner in the queue
	maxPerSubmission int           // MAX_JOBS_PER_SUBMISSION: jobs of one submit
	startCount       int           // JOB_START_COUNT jobs start ...
	startDelay       time.Duration // ... every JOB_START_DELAY at most
	// historyBytes bounds the bytes of the finished jobs' ads the
	// history keeps: MAX_HISTORY_LOG x (1 + MAX_HISTORY_ROTATIONS), or
	// none (0) when ENABLE_HISTORY_ROTATION is false.
	historyBytes int64
}

// loadLimits reads the schedd's limits from cfg.
func loadLimits(cfg *config.Config) (*limits, error) {
	l := &limits{}
	for _, k := range []struct {
		knob string
		def  int
		min  int
		into *int
	}{
		{"MAX_JOBS_RUNNING", 10000, 0, &l.maxRunning},
		{"MAX_JOBS_SUBMITTED", math.MaxInt32, 0, &l.maxSubmitted},
		{"MAX_JOBS_PER_OWNER", 100000, 0, &l.maxPerOwner},
		{"MAX_JOBS_PER_SUBMISSION", math.MaxInt32, 0, &l.maxPerSubmission},
		{"JOB_START_COUNT", 1, 1, &l.startCount},
	} {
		v, err := cfg.Int(k.knob, k.def)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.knob, err)
		}
		if v < k.min {
			return nil, fmt.Errorf("%s = %d: want %d or more", k.knob, v, k.min)
		}
		*k.into = v
	}
	d, err := cfg.Duration("JOB_START_DELAY", 0)
	if err != nil {
		return nil, fmt.Errorf("JOB_START_DELAY: %w", err)
	}
	if d < 0 {
		return nil, fmt.Errorf("JOB_START_DELAY = %v: want 0 or more", d)
	}
	l.startDelay = d
	if l.historyBytes, err = loadHistoryBound(cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// Reconfig re-reads the schedd's limits (condor_reconfig): they apply to
// the next submit and the next job started.
func (s *Schedd) Reconfig(cfg *config.Config) error {
	l, err := loadLimits(cfg)
	if err != nil {
		return err
	}
	refresh, err := passwdCacheRefresh(cfg)
	if err != nil {
		return err
	}
	s.lim.Store(l)
	// As HTCondor's daemons do on reconfig, the owners' accounts are
	// looked up again.
	s.accounts.Reset(refresh)
	return nil
}

// passwdCacheRefresh is PASSWD_CACHE_REFRESH: how long the schedd keeps
// a job owner's account (asuser.Cache).
func passwdCacheRefresh(cfg *config.Config) (time.Duration, error) {
	d, err := cfg.Duration("PASSWD_CACHE_REFRESH", asuser.DefaultRefresh)
	if err != nil {
		return 0, fmt.Errorf("PASSWD_CACHE_REFRESH: %w", err)
	}
	return d, nil
}

// startGate admits the start of jobs: at most MAX_JOBS_RUNNING started
// or running, at most JOB_START_COUNT started every JOB_START_DELAY.
type startGate struct {
	window time.Time // when the current JOB_START_DELAY window began
	n      int       // jobs started in it
	// waiting: a job was kept idle by a limit; the schedd asks for a
	// negotiation cycle once a job ends or the window passes.
	waiting bool
	timer   *time.Timer
}

// admitLocked reports whether one more job may start now, and counts it
// when it may; running is the number of jobs started or running besides
// it. s.mu must be held.
func (s *Schedd) admitLocked(running int) bool {
	l := s.lim.Load()
	if running >= l.maxRunning {
		s.gate.waiting = true
		return false
	}
	if l.startDelay <= 0 {
		return true
	}
	now := s.now()
	g := &s.gate
	if now.Sub(g.window) >= l.startDelay || now.Before(g.window) {
		g.window, g.n = now, 0
	}
	if g.n >= l.startCount {
		if g.timer == nil {
			g.timer = time.AfterFunc(g.window.Add(l.startDelay).Sub(now), func() {
				s.mu.Lock()
				s.gate.timer = nil
				s.mu.Unlock()
				s.reschedule()
			})
		}
		return false
	}
	g.n++
	return true
}

// Attributes of the schedd's ad that show its start limits and where
// they stand (MaxJobsRunning, MaxJobsPerOwner and MaxJobsPerSubmission are
// HTCondor's; the others pond's own): condor q -better-analyze reads them
// to tell a job held back by a schedd limit.
const (
	// AttrJobsStarted counts the jobs starting or running, what
	// MAX_JOBS_RUNNING bounds.
	AttrJobsStarted = "PondJobsStarted"
	// AttrJobStartCount and AttrJobStartDelay are JOB_START_COUNT and
	// JOB_START_DELAY (seconds).
	AttrJobStartCount = "PondJobStartCount"
	AttrJobStartDelay = "PondJobStartDelay"
	// AttrStartsResume is when the schedd may start jobs again (Unix
	// time), set while JOB_START_COUNT jobs started in the current
	// JOB_START_DELAY window.
	AttrStartsResume = "PondJobStartsResume"
)

// limitAttrs puts the schedd's limits, and where the start limits stand,
// in its ad.
func (s *Schedd) limitAttrs(ad wire.Ad) {
	l := s.lim.Load()
	s.mu.Lock()
	started, window, n := len(s.active), s.gate.window, s.gate.n
	s.mu.Unlock()
	ad["MaxJobsRunning"] = strconv.Itoa(l.maxRunning)
	ad["MaxJobsSubmitted"] = strconv.Itoa(l.maxSubmitted)
	ad["MaxJobsPerOwner"] = strconv.Itoa(l.maxPerOwner)
	ad["MaxJobsPerSubmission"] = strconv.Itoa(l.maxPerSubmission)
	ad[AttrJobsStarted] = strconv.Itoa(started)
	ad[AttrJobStartCount] = strconv.Itoa(l.startCount)
	ad[AttrJobStartDelay] = strconv.FormatInt(int64(l.startDelay/time.Second), 10)
	if end := window.Add(l.startDelay); l.startDelay > 0 && n >= l.startCount && end.After(s.now()) {
		ad[AttrStartsResume] = strconv.FormatInt(end.Unix(), 10)
	}
}

// jobEndedLocked notes that a job stopped running: a job a limit kept
// idle may start now. s.mu must be held.
func (s *Schedd) jobEndedLocked() {
	s.kickFactories()
	if s.gate.waiting {
		s.gate.waiting = false
		s.reschedule()
	}
}

// sameLimits reports whether job may reuse a claim matched for prev: the
// negotiator counted the claim against prev's concurrency limits, so the
// next job on it must use the same ones.
func sameLimits(prev, job *classad.Ad) bool {
	lim := func(ad *classad.Ad) string {
		if ad == nil {
			return ""
		}
		v, _ := ad.EvalAttr("ConcurrencyLimits").StringValue()
		return strings.ToLower(strings.Join(strings.Fields(strings.ReplaceAll(v, ",", " ")), ","))
	}
	return lim(prev) == lim(job)
}

// submitLimits serializes the check of the queue limits with the commit
// of the submit it admits.
type submitLimits struct{ mu sync.Mutex }

// checkQueueLimits refuses a submit to clusters of jobs owned as owners
// says (owners[o] of them owned by o; largest is the most jobs of one
// cluster) that would take the queue over its limits, with HTCondor's
// message: MAX_JOBS_PER_SUBMISSION bounds each cluster,
// MAX_JOBS_SUBMITTED and MAX_JOBS_PER_OWNER count the jobs of all of
// them together. The caller counts the owners as it checks the jobs, so
// that a large submit is never held whole for the check. A retry of a
// committed submit is never refused: its jobs are in the queue already.
// That is a submit all of whose clusters hold jobs; one that repeats a
// committed cluster with new ones is counted whole. s.submitLim.mu must
// be held through the commit.
func (s *Schedd) checkQueueLimits(ctx context.Context, clusters []int, owners map[string]int, largest int) error {
	l := s.lim.Load()
	n := 0
	for _, c := range owners {
		n += c
	}
	var counts map[string]map[jobqueue.Status]int
	if largest <= l.maxPerSubmission && (l.maxSubmitted < math.MaxInt32 || l.maxPerOwner < math.MaxInt32) {
		var err error
		if counts, err = s.q.CountsByOwner(ctx); err != nil {
			return fmt.Errorf("counting the queue's jobs: %w", err)
		}
	}
	knob := queueLimitKnob(l, queueTally(counts), owners, n, largest)
	if knob == "" {
		return nil
	}
	for _, c := range clusters {
		done, err := s.q.ClusterCounts(ctx, jobqueue.ClusterJobs(c))
		if err != nil || len(done) == 0 || done[0].Jobs == 0 {
			return queueLimitError(knob)
		}
	}
	return nil
}

// queueCount is what the queue holds, as the queue limits count it.
type queueCount struct {
	total   int
	byOwner map[string]int
}

// queueTally sums the queue's counts by owner and status.
func queueTally(counts map[string]map[jobqueue.Status]int) queueCount {
	c := queueCount{byOwner: make(map[string]int, len(counts))}
	for o, byStatus := range counts {
		for _, n := range byStatus {
			c.byOwner[o] += n
			c.total += n
		}
	}
	return c
}

// queueLimitKnob names the queue limit that n more jobs, owners[o] of
// them owned by o and at most largest of them in one cluster, would
// break on a queue holding q; "" when none. MAX_JOBS_PER_SUBMISSION is
// checked first: over it, q is not needed.
func queueLimitKnob(l *limits, q queueCount, owners map[string]int, n, largest int) string {
	if largest > l.maxPerSubmission {
		return "MAX_JOBS_PER_SUBMISSION"
	}
	if q.total+n > l.maxSubmitted {
		return "MAX_JOBS_SUBMITTED"
	}
	for o, c := range owners {
		if c > 0 && q.byOwner[o]+c > l.maxPerOwner {
			return "MAX_JOBS_PER_OWNER"
		}
	}
	return ""
}

// queueLimitError is a submit refused by the queue limit it names, with
// HTCondor's message; it is a wire.ErrConflict.
type queueLimitError string

func (e queueLimitError) Error() string {
	return "Number of submitted jobs would exceed " + string(e)
}

func (e queueLimitError) Is(target error) bool { return target == wire.ErrConflict }
