// Package schedd is pond's schedd: it keeps the job queue (condor/jobqueue,
// durable across kill -9), accepts submissions from members of its pool,
// advertises itself and its submitters to the collector, runs the jobs the
// negotiator matches through a shadow per job that claims the slot,
// transfers files to and from the starter and writes the job event log, and
// reuses a claim for the next matching idle job.
package schedd

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// Options configure a Schedd.
type Options struct {
	Config  *config.Config
	Name    string // schedd name (default the host name)
	Address string // this node's API address
	DataDir string // SPOOL is DataDir/spool unless configured
	Token   string // pool token
	// Collector returns the central manager's address (CONDOR_HOST); it may
	// change at run time.
	Collector func() string
	Logger    *slog.Logger
	Now       func() time.Time
}

// Schedd is a running schedd.
type Schedd struct {
	opts  Options
	log   *slog.Logger
	q     *jobqueue.Queue
	now   func() time.Time
	lease time.Duration
	uid   string
	// adv serializes updates and invalidations: an update in flight to
	// a collector the schedd is leaving lands before the invalidation.
	adv sync.Mutex

	mu      sync.Mutex
	idle    *idleSet                  // idle jobs not being started
	active  map[jobqueue.JobID]*claim // jobs being started or running
	claims  map[string]*claim         // claim id -> claim
	dirty   chan struct{}
	wake    chan struct{} // reschedule request to the negotiator
	sem     chan struct{} // bounds concurrent shadows' calls
	wg      sync.WaitGroup
	stopped bool
	logMu   sync.Mutex
	logs    map[string]*joblog.Writer
}

// claim is a slot the schedd holds, idle or running one job.
type claim struct {
	id       string
	startd   string
	slotName string
	slot     *classad.Ad
	job      jobqueue.JobID
	ad       *classad.Ad // the running job's ad

	busy     bool
	deadline time.Time // lease of a job recovered after a restart; zero otherwise
	verified bool      // the startd confirmed the recovered claim runs the job
}

// New opens the job queue and recovers the claims of jobs that were
// running when the schedd last stopped.
func New(ctx context.Context, opts Options) (*Schedd, error) {
	if opts.Config == nil {
		opts.Config = config.New(config.Options{})
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name, _ = os.Hostname()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Collector == nil {
		opts.Collector = func() string { return "" }
	}
	spool := filepath.Join(opts.DataDir, "spool")
	if v, ok := opts.Config.Get("SPOOL"); ok && v != "" && opts.DataDir == "" {
		spool = v
	}
	if err := os.MkdirAll(spool, 0o755); err != nil {
		return nil, fmt.Errorf("creating spool directory: %w", err)
	}
	sync := "NORMAL"
	if v, _ := opts.Config.Get("JOB_QUEUE_SYNCHRONOUS"); strings.EqualFold(v, "FULL") {
		sync = "FULL"
	}
	q, err := jobqueue.OpenWith(ctx, filepath.Join(spool, "job_queue.db"), jobqueue.Options{Synchronous: sync, Now: opts.Now})
	if err != nil {
		return nil, fmt.Errorf("opening job queue: %w", err)
	}
	lease, err := opts.Config.Duration("JOB_LEASE_DURATION", 20*time.Minute)
	if err != nil {
		q.Close()
		return nil, fmt.Errorf("JOB_LEASE_DURATION: %w", err)
	}
	uid, _ := opts.Config.Get("UID_DOMAIN")
	s := &Schedd{opts: opts, log: opts.Logger.With("daemon", "schedd"), q: q, now: opts.Now, lease: lease,
		uid: firstNonEmpty(uid, opts.Name), idle: newIdleSet(),
		active: map[jobqueue.JobID]*claim{}, claims: map[string]*claim{}, dirty: make(chan struct{}, 1),
		wake: make(chan struct{}, 1), sem: make(chan struct{}, 64), logs: map[string]*joblog.Writer{}}
	if err := s.recover(ctx); err != nil {
		q.Close()
		return nil, err
	}
	return s, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Queue returns the schedd's job queue.
func (s *Schedd) Queue() *jobqueue.Queue { return s.q }

// recover loads idle jobs and re-adopts the claims of running jobs; each
// gets JOB_LEASE_DURATION for its starter to report, or it is requeued.
func (s *Schedd) recover(ctx context.Context) error {
	idle, err := s.q.Idle(ctx)
	if err != nil {
		return fmt.Errorf("loading idle jobs: %w", err)
	}
	for _, j := range idle {
		ij, err := newIdleJob(j)
		if err != nil {
			s.log.Warn("unparsable job ad", "job", j.ID, "err", err)
			continue
		}
		s.idle.put(j.ID, ij)
	}
	running, err := s.q.Query(ctx, jobqueue.Selector{All: true, Constraint: func(j jobqueue.Job) bool { return j.Status == jobqueue.Running }},
		[]string{"PondClaimId", "PondStartd", "RemoteHost", "JobStatus"})
	if err != nil {
		return fmt.Errorf("loading running jobs: %w", err)
	}
	for _, j := range running {
		if j.Status != jobqueue.Running {
			continue
		}
		id, _ := classad.UnquoteString(j.Ad["PondClaimId"])
		startd, _ := classad.UnquoteString(j.Ad["PondStartd"])
		slotName, _ := classad.UnquoteString(j.Ad["RemoteHost"])
		c := &claim{id: id, startd: startd, slotName: slotName, job: j.ID, busy: true, deadline: s.now().Add(s.lease)}
		s.active[j.ID] = c
		if id != "" {
			s.claims[id] = c
		}
	}
	return nil
}

func (s *Schedd) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

func (s *Schedd) reschedule() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run advertises the schedd and its submitters every UPDATE_INTERVAL and
// soon after changes, asks the negotiator for a cycle after new idle jobs,
// and expires the leases of recovered jobs, until ctx ends.
func (s *Schedd) Run(ctx context.Context) error {
	update, err := s.opts.Config.Duration("UPDATE_INTERVAL", 300*time.Second)
	if err != nil {
		return fmt.Errorf("UPDATE_INTERVAL: %w", err)
	}
	t := time.NewTicker(update)
	defer t.Stop()
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	s.advertise(ctx)
	lastAd := time.Now()
	s.mu.Lock()
	anyIdle := s.idle.len() > 0
	s.mu.Unlock()
	if anyIdle {
		s.reschedule()
	}
	for {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
			s.wg.Wait()
			ictx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.invalidate(ictx, s.opts.Collector())
			cancel()
			return nil
		case <-t.C:
			s.advertise(ctx)
		case <-s.dirty:
			// At most one update a second for changes.
			select {
			case <-ctx.Done():
			case <-time.After(max(100*time.Millisecond, time.Until(lastAd.Add(time.Second)))):
			}
			s.advertise(ctx)
			lastAd = time.Now()
		case <-s.wake:
			s.advertise(ctx)
			if cm := s.opts.Collector(); cm != "" {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err := wire.NewNegotiator(cm, s.opts.Token).Reschedule(rctx); err != nil && ctx.Err() == nil {
					s.log.Debug("asking negotiator for a cycle", "err", err)
				}
				cancel()
			}
		case <-sweep.C:
			s.expireLeases(ctx)
		}
	}
}

// Close closes the job queue; call it after Run returned.
func (s *Schedd) Close() error { return s.q.Close() }

func (s *Schedd) source() string { return "schedd@" + s.opts.Name }

// advertise sends the schedd ad and one submitter ad per owner.
func (s *Schedd) advertise(ctx context.Context) {
	s.adv.Lock()
	defer s.adv.Unlock()
	cm := s.opts.Collector()
	if cm == "" {
		return
	}
	jobs, err := s.q.Query(ctx, jobqueue.AllJobs(), []string{"Owner", "JobStatus"})
	if err != nil {
		s.log.Warn("counting jobs", "err", err)
		return
	}
	type counts struct{ idle, running, held int }
	per := map[string]*counts{}
	var total counts
	for _, j := range jobs {
		c := per[j.Owner]
		if c == nil {
			c = &counts{}
			per[j.Owner] = c
		}
		switch j.Status {
		case jobqueue.Idle:
			c.idle++
			total.idle++
		case jobqueue.Running:
			c.running++
			total.running++
		case jobqueue.Held:
			c.held++
			total.held++
		}
	}
	now := s.now().Unix()
	sched := wire.Ad{
		"MyType": `"Scheduler"`, "Name": strconv.Quote(s.opts.Name), "Machine": strconv.Quote(s.opts.Name),
		"MyAddress": strconv.Quote("<" + s.opts.Address + ">"), "PondAddress": strconv.Quote(s.opts.Address),
		"ScheddIpAddr":  strconv.Quote("<" + s.opts.Address + ">"),
		"TotalIdleJobs": strconv.Itoa(total.idle), "TotalRunningJobs": strconv.Itoa(total.running),
		"TotalHeldJobs": strconv.Itoa(total.held), "TotalJobAds": strconv.Itoa(len(jobs)),
		"CondorVersion": strconv.Quote("$CondorVersion: " + config.Version + " pond $"), "DaemonStartTime": strconv.FormatInt(now, 10),
	}
	c := wire.NewCollector(cm, s.opts.Token)
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Update(uctx, &wire.UpdateRequest{Type: wire.TypeSchedd, Source: s.source(), Ads: []wire.Ad{sched}}); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("updating collector", "collector", cm, "err", err)
		}
		return
	}
	var subs []wire.Ad
	for owner, n := range per {
		subs = append(subs, wire.Ad{
			"MyType": `"Submitter"`, "Name": strconv.Quote(owner + "@" + s.uid), "Owner": strconv.Quote(owner),
			"ScheddName": strconv.Quote(s.opts.Name), "PondAddress": strconv.Quote(s.opts.Address),
			"IdleJobs": strconv.Itoa(n.idle), "RunningJobs": strconv.Itoa(n.running), "HeldJobs": strconv.Itoa(n.held),
		})
	}
	if err := c.Update(uctx, &wire.UpdateRequest{Type: wire.TypeSubmitter, Source: s.source(), Ads: subs}); err != nil && ctx.Err() == nil {
		s.log.Warn("updating collector", "collector", cm, "err", err)
	}
}

func (s *Schedd) invalidate(ctx context.Context, cm string) {
	if cm == "" {
		return
	}
	c := wire.NewCollector(cm, s.opts.Token)
	_ = c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSchedd, Source: s.source()})
	_ = c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSubmitter, Source: s.source()})
}

// SetCollector is called on reconfig after CONDOR_HOST changed: the schedd
// withdraws its ads from the old collector and advertises to the new one.
func (s *Schedd) SetCollector(ctx context.Context, old string) {
	if old != "" && old != s.opts.Collector() {
		// After any update to the old collector still on its way.
		s.adv.Lock()
		s.invalidate(ctx, old)
		s.adv.Unlock()
	}
	s.markDirty()
	s.reschedule()
}

// expireLeases reconnects to the jobs recovered after a restart: a job
// whose startd says its claim no longer runs it, or whose starter has not
// reported within JOB_LEASE_DURATION, is requeued.
func (s *Schedd) expireLeases(ctx context.Context) {
	now := s.now()
	var expired, unverified []*claim
	s.mu.Lock()
	for _, c := range s.active {
		switch {
		case c.deadline.IsZero():
		case now.After(c.deadline):
			expired = append(expired, c)
		case !c.verified && c.startd != "" && c.id != "":
			unverified = append(unverified, c)
		}
	}
	s.mu.Unlock()
	for _, c := range unverified {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := wire.NewStartd(c.startd, s.opts.Token).ClaimInfo(cctx,
			&wire.ClaimInfoRequest{ClaimID: c.id, Schedd: s.opts.Address, ScheddName: s.opts.Name})
		cancel()
		if err != nil {
			continue // unreachable: the lease decides
		}
		if info.Exists && info.Active && info.JobID == c.job.String() {
			s.mu.Lock()
			c.verified = true
			s.mu.Unlock()
			continue
		}
		expired = append(expired, c)
	}
	for _, c := range expired {
		s.mu.Lock()
		current := s.active[c.job] == c && !c.deadline.IsZero()
		s.mu.Unlock()
		if !current {
			continue // reported meanwhile
		}
		s.log.Info("lost the claim of a recovered job; requeueing", "job", c.job)
		s.finishClaim(c)
		s.release(c)
		if err := s.q.Transition(ctx, c.job, jobqueue.Idle, nil); err != nil {
			s.log.Warn("requeueing job", "job", c.job, "err", err)
			continue
		}
		s.writeEvent(ctx, c.job, nil, joblog.Event{Type: joblog.Evicted, Message: "Job lease expired"})
		s.addIdle(ctx, c.job)
	}
}

func (s *Schedd) finishClaim(c *claim) {
	s.mu.Lock()
	delete(s.active, c.job)
	delete(s.claims, c.id)
	s.mu.Unlock()
}

func (s *Schedd) addIdle(ctx context.Context, id jobqueue.JobID) {
	j, err := s.q.Get(ctx, id)
	if err != nil || j.Status != jobqueue.Idle {
		return
	}
	ij, err := newIdleJob(j)
	if err != nil {
		return
	}
	s.mu.Lock()
	if _, busy := s.active[id]; !busy {
		s.idle.put(id, ij)
	}
	s.mu.Unlock()
	s.markDirty()
	s.reschedule()
}

// ClaimInfo says whether the schedd holds a claim, and for which job. A
// startd asks about a claim it has left idle: a schedd restarted since it
// made the claim no longer knows it, and the startd may release the slot
// at once instead of waiting for CLAIM_IDLE_TIMEOUT.
func (s *Schedd) ClaimInfo(ctx context.Context, req *wire.ClaimInfoRequest) (*wire.ClaimInfoResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.claims[req.ClaimID]
	if c == nil {
		return &wire.ClaimInfoResponse{}, nil
	}
	return &wire.ClaimInfoResponse{Exists: true, JobID: c.job.String(), Active: c.busy}, nil
}

// Handler serves the schedd's endpoints relative to its mount point.
func (s *Schedd) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/submit", wire.Handle(s.Submit))
	mux.Handle("/query", wire.Handle(s.QueryJobs))
	mux.Handle("/act", wire.Handle(s.Act))
	mux.Handle("/history", wire.Handle(s.History))
	mux.Handle("/idle", wire.Handle(s.Idle))
	mux.Handle("/matches", wire.Handle(s.Matches))
	mux.Handle("/jobreport", wire.Handle(s.JobReport))
	mux.Handle("/claiminfo", wire.Handle(s.ClaimInfo))
	return mux
}

func parseJobID(s string) (jobqueue.JobID, error) {
	id, err := jobqueue.ParseJobID(s)
	if err != nil {
		return id, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	return id, nil
}

// fits reports whether job can run in a claimed slot: both ads' requirements
// hold and the slot has the resources the job requests.
func fits(job, slot *classad.Ad) bool {
	if !classad.Match(job, slot) {
		return false
	}
	return job.EvalNumber("RequestCpus", slot, 1) <= slot.EvalNumber("Cpus", job, 0) &&
		job.EvalNumber("RequestMemory", slot, 0) <= slot.EvalNumber("Memory", job, 0) &&
		job.EvalNumber("RequestDisk", slot, 0) <= slot.EvalNumber("Disk", job, 0)
}

// idleJob is an idle job's ad, parsed and on the wire.
type idleJob struct {
	owner string
	ad    *classad.Ad
	w     wire.Ad
}

func newIdleJob(j jobqueue.Job) (*idleJob, error) {
	ad, err := wire.ToClassAd(j.Ad)
	if err != nil {
		return nil, err
	}
	return &idleJob{owner: j.Owner, ad: ad, w: j.Ad}, nil
}

func less(a, b jobqueue.JobID) bool {
	if a.Cluster != b.Cluster {
		return a.Cluster < b.Cluster
	}
	return a.Proc < b.Proc
}

// idleSet holds idle jobs in job id order. Deletions leave stale ids in
// order, skipped and compacted lazily, so that the common operations (take
// the first job, delete it) are cheap with many idle jobs.
type idleSet struct {
	m     map[jobqueue.JobID]*idleJob
	order []jobqueue.JobID // ascending; may hold ids no longer in m
}

func newIdleSet() *idleSet { return &idleSet{m: map[jobqueue.JobID]*idleJob{}} }

func (s *idleSet) len() int { return len(s.m) }

func (s *idleSet) get(id jobqueue.JobID) *idleJob { return s.m[id] }

func (s *idleSet) put(id jobqueue.JobID, ij *idleJob) {
	s.m[id] = ij
	n := len(s.order)
	if n == 0 || less(s.order[n-1], id) {
		s.order = append(s.order, id)
		return
	}
	i := sort.Search(n, func(i int) bool { return !less(s.order[i], id) })
	if i < n && s.order[i] == id {
		return
	}
	s.order = append(s.order, jobqueue.JobID{})
	copy(s.order[i+1:], s.order[i:])
	s.order[i] = id
}

func (s *idleSet) delete(id jobqueue.JobID) {
	delete(s.m, id)
	if len(s.order) > 2*len(s.m)+1024 {
		kept := s.order[:0]
		for _, x := range s.order {
			if _, ok := s.m[x]; ok {
				kept = append(kept, x)
			}
		}
		s.order = kept
	}
}

// each calls f for the idle jobs in id order until f returns false.
func (s *idleSet) each(f func(jobqueue.JobID, *idleJob) bool) {
	for len(s.order) > 0 {
		if _, ok := s.m[s.order[0]]; ok {
			break
		}
		s.order = s.order[1:]
	}
	for _, id := range s.order {
		if ij, ok := s.m[id]; ok && !f(id, ij) {
			return
		}
	}
}
